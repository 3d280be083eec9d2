"""Hide or reveal a key with a click, without leaving the view (issue 9).

Alt+click on a cell of any query × key stage hides that key from that query (or shows it again);
Alt+Shift+click hides (or shows) the whole token from every query. The mask the view computes with
becomes a custom one: the current mask (none, causal, padding or the painted one) with that cell or
column toggled, shown and editable in the mask painter. Toy engine only (a model's layer is traced
with its own mask).
"""

from __future__ import annotations

import numpy as np

from .mask_dock import as_rows


def current_hidden(inputs, n_q: int, n_k: int) -> np.ndarray:
    """``(n_q, n_k)`` bool: the keys the current inputs hide (True = hidden)."""
    if inputs.mask == "custom" and inputs.painted_mask:
        painted = np.array(inputs.painted_mask, bool)
        if painted.shape == (n_q, n_k):
            return painted.copy()
    hidden = np.zeros((n_q, n_k), bool)
    if inputs.mask == "causal":
        hidden |= np.triu(np.ones((n_q, n_k), bool), 1)
    if inputs.mask == "padding":
        hidden[:, [p for p in inputs.pad_positions if p < n_k]] = True
    return hidden


class KeyHider:
    def __init__(self, window):
        self.window_, self.state = window, window.state
        window.matrix_view.key_toggled.connect(self.toggle)

    def toggle(self, row: int, col: int, whole_token: bool = False) -> bool:
        """Flip key ``col`` for query ``row`` (or for every query); False when it cannot apply."""
        inputs, display = self.state.inputs, self.state.display
        if display is None:
            return False
        if inputs.uses_model or inputs.mask_file:
            why = "a model's layer keeps its own mask" if inputs.uses_model else "the mask comes from --mask-file"
            self.window_.status_line.show_error(f"cannot hide a key here: {why}")
            return False
        n_q, n_k = len(display.trace.query_tokens), len(display.trace.key_tokens)
        hidden = current_hidden(inputs, n_q, n_k)
        if whole_token:
            hidden[:, col] = not hidden[:, col].all()
        else:
            hidden[row, col] = not hidden[row, col]
        self.state.update_inputs(mask="custom", painted_mask=as_rows(hidden))
        return True
