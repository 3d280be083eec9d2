"""The painted custom mask: a dock with the MaskPainter, shown while the toy engine's mask is
"custom" without a --mask-file; each stroke becomes ``Inputs.painted_mask`` (so it recomputes)."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QDockWidget

from explorer.widgets.frames import later
from explorer.widgets.mask_painter import STARTS, MaskPainter
from models.files.export import write_array
from models.files.run_files import load_matrix


def as_rows(mask: np.ndarray) -> tuple[tuple[bool, ...], ...]:
    return tuple(tuple(bool(v) for v in row) for row in np.asarray(mask, bool))


class MaskDock(QDockWidget):
    """Handed the state and the status line's ``error``; the window docks it (bottom area)."""

    def __init__(self, state, error, parent=None, off_gui=None):
        """``off_gui(compute)``: where a mask file is read (the window's jobs.call: another thread)."""
        super().__init__("Custom mask (True = hidden)", parent)
        self.setObjectName("maskDock")
        self.state = state
        off_gui = off_gui or (lambda compute: compute())
        load = lambda path: off_gui(lambda: load_matrix(path, "mask"))  # noqa: E731
        self.painter = MaskPainter(load, write_array, pane=state.mask_painter)  # its status line: the state's
        self.painter.setMinimumHeight(240)
        self.setWidget(self.painter)
        self.painter.mask_changed.connect(self._painted)
        self.painter.error.connect(error)
        self.state.inputs_changed.connect(self._inputs_changed)
        self.state.trace_changed.connect(lambda _display: self._follow_trace())
        self._previous_mask = self.state.inputs.mask
        self._following = False
        self.setVisible(self.wanted())

    def wanted(self) -> bool:
        inputs = self.state.inputs
        return not inputs.uses_model and inputs.mask == "custom" and not inputs.mask_file

    def _inputs_changed(self, inputs) -> None:
        previous, self._previous_mask = self._previous_mask, inputs.mask
        self.setVisible(self.wanted())
        if self.wanted() and previous != "custom":  # start from the mask that was shown
            later(0, self, lambda: self._start(previous if previous in STARTS else "none"))

    def _start(self, kind: str) -> None:
        painted = self.state.inputs.painted_mask  # one already painted (or a session's) is kept
        if self._follow_trace() and not painted:
            self.painter.start_from(kind)

    def _follow_trace(self) -> bool:
        """The grid takes the shown trace's tokens; the painter and the inputs agree afterwards."""
        display = self.state.display
        if not self.wanted() or display is None:
            return False
        inputs = self.state.inputs
        # Only the user's strokes change the inputs: a trace still on screen from earlier inputs
        # (another sentence) must not replace a session's mask with an empty one.
        self._following = True
        try:
            self.painter.set_tokens(display.trace.query_tokens, display.trace.key_tokens, inputs.pad_positions)
            painted = np.array(inputs.painted_mask, bool) if inputs.painted_mask else None
            if painted is not None and painted.shape == self.painter.shape:
                if not np.array_equal(painted, self.painter.mask()):
                    self.painter.set_mask(painted)
            elif painted is not None:
                self.painter.start_from("none")  # what is computed for a mask that does not fit
        finally:
            self._following = False
        return True

    def _painted(self, mask: np.ndarray) -> None:
        if self.wanted() and not self._following:
            self.state.update_inputs(painted_mask=as_rows(mask))
