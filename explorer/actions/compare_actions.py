"""Stage → Pin this run (Ctrl+K) / Unpin: keep the DisplayTrace on screen (no recomputation) and
show it beside every later run in a compare window that follows the stepper and the head choice.

The comparison (two heads read, their difference, three images) is computed off the GUI thread
(explorer.jobs): up to 2048² cells each, it took the GUI thread tens of milliseconds per step."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt

from explorer.engine.compare import COMPARE_SIDE, Comparison, changes, compare
from explorer.state import ALL_HEADS
from explorer.widgets.compare_view import CompareView
from explorer.widgets.window_size import open_sized

Report = Callable[[str], None]


class CompareActions(QObject):
    """The compare window of the pinned run (``state.pinned``: the state holds it, this shows it).
    Handed the state, the read-job runner (``jobs``: the comparison is computed off the GUI thread),
    the status line's ``info`` and ``error`` and the window the compare view belongs to (``parent``);
    Stage → Pin this run / Unpin (explorer.actions) call pin() / unpin(). The compare window is open
    while a run is pinned: pinning (a session's apply too) opens it, closing it unpins."""

    def __init__(self, state, jobs, info: Report, error: Report, parent=None):
        super().__init__(parent)
        self.state, self.jobs, self._parent, self._info, self._error = state, jobs, parent, info, error
        self.view: CompareView | None = None
        for signal in (self.state.trace_changed, self.state.stage_changed, self.state.head_changed,
                       self.state.focus_head_changed, self.state.colours_changed):  # fmt: skip
            signal.connect(self.refresh)
        self.state.pinned_changed.connect(self._pinned_changed)

    @property
    def comparison(self) -> Comparison | None:
        """What the compare window shows: the state's compare pane (explorer/panes.py)."""
        return self.state.compare.shown

    @property
    def pinned(self):
        """The pinned DisplayTrace (the state's), or None."""
        return self.state.pinned

    def pin(self) -> bool:
        if not self.state.pin():
            self._error("nothing to pin yet: the first computation has not finished")
            return False
        if self.view is not None:  # the same run pinned again: its window to the front
            self.view.show()
            self.view.raise_()
        self._info("run pinned: change anything and compare it in the compare window")
        return True

    def unpin(self) -> None:
        self.state.unpin()

    def _pinned_changed(self, pinned) -> None:
        self.state.compare.set_shown(None)
        self.jobs.cancel("compare")
        if pinned is None:
            if self.view is not None:
                self.view.hide()
            return
        if self.view is None:
            self.view = CompareView(self._parent)  # a window of its own, closed with the main one
            self.view.setWindowFlag(Qt.WindowType.Window)
            self.view.setWindowTitle("Compare runs: pinned and current")
            open_sized(self.view, 1100, 460)
            self.view.closeEvent = self._view_closed
            self.view.resized.connect(self.refresh)  # new device pixels: reduced to them again
        self.refresh()
        self.view.show()
        self.view.raise_()

    def _view_closed(self, event) -> None:
        event.accept()
        self.state.unpin()

    def shown_head(self) -> int:
        """The head compared: the one picked, or the focused one when all heads are shown."""
        return self.state.head if self.state.head != ALL_HEADS else self.state.focus_head

    def refresh(self, *_args) -> None:
        display = self.state.display
        if self.pinned is None or display is None or self.view is None:
            return
        pinned, current = self.pinned.trace, display.trace
        stage, head, fit = self.state.stage_name, self.shown_head(), self.state.fit_colours
        side = self.view.device_side() or COMPARE_SIDE  # the screen's own pixels, once laid out

        def read() -> tuple[Comparison, str]:  # on the read thread: the traces' numbers, never the GUI's
            return compare(pinned, current, stage, head, fit, side), changes(pinned, current)

        self.jobs.ask("compare", read, self._show)

    def _show(self, answer: tuple[Comparison, str]) -> None:
        if self.pinned is None or self.view is None:
            return
        comparison, heading = answer
        self.state.compare.set_shown(comparison)
        self.view.show_comparison(comparison, heading)
