"""View → Training timeline…: build the timeline of the model on screen and connect it to the
window's state (the slider sets the traced model to that step's folder; a clicked head opens it)."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from explorer.widgets.window_size import bring_forward, open_sized
from models.config import InputError


def open_timeline(state, submit, error, sentence: str | None = None, step: str | None = None, off_gui=None):
    """The timeline of the state's model (the shipped ``induction`` for the toy) on its sentence.
    The slider's step is traced at once (``submit``); a step that is not there is said (``error``).
    Raises InputError when the model has no training history. Every checkpoint is loaded and traced
    by ``off_gui`` (the window's ``jobs.call``: another thread, waited for), never on the GUI thread."""
    from explorer.engine.timeline_data import build_timeline
    from explorer.panels.timeline_window import TimelineWindow

    model = state.inputs.model or "induction"
    text = sentence or state.inputs.sentence
    QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
    try:
        timeline = (off_gui or (lambda compute: compute()))(lambda: build_timeline(model, text))
    finally:
        QApplication.restoreOverrideCursor()

    def on_step(path: Path) -> None:
        state.update_inputs(model=str(path))
        submit()  # at once: the worker traces while the GUI repaints the step marker

    def on_head(path: Path, layer: int, head: int) -> None:
        state.update_inputs(model=str(path), layer=layer)
        state.set_head(head)

    timeline_window = TimelineWindow(timeline, on_step, on_head)
    timeline_window.step_changed.connect(state.timeline.set_shown)  # the state's timeline pane: the step shown
    open_sized(timeline_window, 900, 820)
    if step is not None:
        from models.pretrained.steps import parse_step

        try:
            timeline_window.set_step(parse_step(step, timeline.steps, timeline.name))
        except InputError as exc:
            error(str(exc))
    state.timeline.set_shown(timeline_window.step)
    timeline_window.show()
    bring_forward(timeline_window)  # opened from the window's menu or at start: in front of it
    return timeline_window


def start_timeline(window, step: str | None):
    """``--timeline`` at start: the main window shown first, then its timeline in front of it (opened
    before the window was shown, the timeline was hidden behind it as the window came up)."""
    window.show()
    return window.windows.open_timeline(step=step)


def timeline_screenshot(app, window, timeline, paths: tuple[str, str | None], window_screenshot) -> int:
    """Save the timeline as ``paths[0]`` and, when ``paths[1]`` names a file (``--window-screenshot``),
    the main window (tracing the slider's step) there: never a file the user did not name."""
    path, window_path = paths
    try:
        if timeline is None:
            print(f"error: {window.windows.timeline_error}", file=sys.stderr)
            return 2
        if window_path is not None:
            code = window_screenshot(app, window, window_path, None)
            app.processEvents()
            if code != 0:
                return code
        from explorer.files.image_export import save_screenshot

        return save_screenshot(timeline, Path(path))  # atomic: a failed write never touches the old PNG
    finally:
        if timeline is not None:
            timeline.close()
        window.close()
        window.deleteLater()
        app.processEvents()
