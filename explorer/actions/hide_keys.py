"""Hide or reveal a key with a click, without leaving the view (issue 9).

Alt+click on a cell of any query × key stage hides that key from that query (or shows it again);
Alt+Shift+click hides (or shows) the whole token from every query. The mask the view computes with
becomes a custom one: the current mask (none, causal, padding or the painted one) with that cell or
column toggled, shown and editable in the mask painter. On a model's layer the click is a what-if
edit of that layer's mask instead (models/pretrained/edits.py): undone, redone and reset with the
other edits, the layers below keeping the model's own mask.
"""

from __future__ import annotations

import numpy as np

from explorer.panels.mask_dock import as_rows
from models.engine.edits import hide_key
from models.engine.mask_rule import hidden_array
from models.pretrained.edits import traced_hidden


def current_hidden(inputs, n_q: int, n_k: int) -> np.ndarray:
    """``(n_q, n_k)`` bool: the keys the current inputs hide (True = hidden)."""
    if inputs.mask == "custom" and inputs.painted_mask:
        painted = np.array(inputs.painted_mask, bool)
        if painted.shape == (n_q, n_k):
            return painted.copy()
    pads = inputs.pad_positions if inputs.mask == "padding" else ()
    return hidden_array(n_q, n_k, causal=inputs.mask == "causal", pads=pads)


class KeyHider:
    """Handed the state (its inputs, and a model's mask edits), the matrix view (its Alt+clicks) and
    the status line's ``error``."""

    def __init__(self, state, view, error):
        self.state, self._error = state, error
        view.key_toggled.connect(self.toggle)

    def toggle(self, row: int, col: int, whole_token: bool = False) -> bool:
        """Flip key ``col`` for query ``row`` (or for every query); False when it cannot apply."""
        inputs, display = self.state.inputs, self.state.display
        if display is None:
            return False
        if inputs.uses_model:
            return self._edit_layer_mask(display.trace, row, col, whole_token)
        if inputs.mask_file:
            self._error("cannot hide a key here: the mask comes from --mask-file")
            return False
        n_q, n_k = len(display.trace.query_tokens), len(display.trace.key_tokens)
        hidden = current_hidden(inputs, n_q, n_k)
        if whole_token:
            hidden[:, col] = not hidden[:, col].all()
        else:
            hidden[row, col] = not hidden[row, col]
        self.state.update_inputs(mask="custom", painted_mask=as_rows(hidden))
        return True

    def _edit_layer_mask(self, trace, row: int, col: int, whole_token: bool) -> bool:
        """A model's layer: hide (or show) the key as a mask edit, one undo step."""
        state = self.state
        n = len(trace.key_tokens)
        if col >= n:  # a learned attention sink's column (gpt-oss): not a key, nothing to hide
            self._error("the sink is not a key: it cannot be hidden")
            return False
        hidden = traced_hidden(trace.config, n, state.edits)  # (n, n)
        if whole_token:
            hide = not hidden[:, col].all()
            state.add_edits([hide_key(i, col, hide) for i in range(n) if hidden[i, col] != hide])
        else:
            state.add_edits([hide_key(row, col, not hidden[row, col])])
        return True
