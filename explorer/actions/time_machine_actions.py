"""File → Time machine…: build the history of the model on screen (off the GUI thread) and connect
its slider to the window's state, as the training timeline does."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from explorer.widgets.window_size import open_sized


def open_time_machine(state, submit, sentence: str | None = None, cell=None, off_gui=None):
    """The time machine of the state's model (the shipped ``induction`` for the toy) on its sentence,
    the why series for ``cell`` (head, query, key) of the state's layer (default: head 0, the last query
    and its top key). Raises InputError when the model has no training history."""
    from explorer.engine.time_machine_data import build_time_machine
    from explorer.panels.time_machine_window import TimeMachineWindow

    inputs = state.inputs
    model = inputs.model or "induction"
    text = sentence or inputs.sentence
    layer = int(getattr(inputs, "layer", 0) or 0)
    QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
    try:
        tm = (off_gui or (lambda compute: compute()))(lambda: build_time_machine(model, text, layer, cell))
    finally:
        QApplication.restoreOverrideCursor()

    def on_step(path: Path) -> None:
        state.update_inputs(model=str(path))
        submit()

    def on_head(layer: int, head: int) -> None:
        state.update_inputs(layer=layer)
        state.set_head(head)

    window = TimeMachineWindow(tm, on_step, on_head)
    open_sized(window, 1100, 820)
    window.show()
    return window
