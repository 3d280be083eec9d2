"""The Why panel in a dock beside the inspector (File → Why does this head attend here?…, issue 33).

Hidden at start, so the inspector keeps its room; while shown, every clicked cell of a score or weight
stage is split (off the GUI thread, explorer.panels.why_panel). Handed the state, the read jobs and the
worker's loaded models, never the window.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QDockWidget, QStyle, QWidget

from explorer.panels.why_panel import WhyPanel
from explorer.widgets.window_size import available_size, keep_on_screen

OPEN_WIDTH = 560  # px: the table of a 2-layer, 4-head model readable at once
TABLE_LEAST = 380  # px: the least width the dock keeps beside the columns (an 18-key table, ~12 px a column)
TITLE_BUTTONS = 70  # px: a dock title's float and close buttons and margins
ROOM_AGAIN = 40  # px: floated for want of room, it docks beside the columns with this much more than its least


class WhyDock(QDockWidget):
    def __init__(self, state, jobs, frames, parent: QWidget | None = None) -> None:
        """``frames``: the window's scheduler (its width is fitted after the window's layout has run); the
        model that made a run is its own (``display.run.engine``, models.api.Trace)."""
        super().__init__("Why does this head attend here?", parent)
        self.setObjectName("whyDock")
        self.state, self.frames = state, frames
        self.panel = WhyPanel(jobs=jobs)
        self.setWidget(self.panel)
        self.panel.setMinimumWidth(TITLE_BUTTONS)  # its table's least width is not the window's either
        # Beside the columns never below its whole title and buttons (it was ~100 px: "Why doe…"); not a
        # minimum of the window's, which a 960 px window could not honour (the columns' 748 px and this
        # added up to 1,023-1,169 px, the inspector cut): floated beside it when it does not fit (``_fit``).
        # and its table readable (at its title's 269 px an 18-column table was ~5 px wide)
        self.least_width = max(self.fontMetrics().horizontalAdvance(self.windowTitle()) + TITLE_BUTTONS, TABLE_LEAST)
        self.floated = False  # floated by ``_fit``, for want of room beside the columns
        self.topLevelChanged.connect(lambda floating: floating or setattr(self, "floated", False))  # docked by hand
        self.clicked: tuple | None = None  # the last clicked cell: (display, stage, head, row, col)
        self.visibilityChanged.connect(lambda shown: shown and self.split_clicked())
        state.trace_changed.connect(lambda _display: self.panel.clear())  # its numbers are gone
        self.panel.open_head.connect(self.open_head)
        # Its width as the window is resized: (the dock's chosen width, the window's columns' width then).
        self._chosen: tuple[int, int] | None = None
        if parent is not None:
            parent.installEventFilter(self)

    def open(self) -> WhyDock:
        """Show the dock, splitting the last clicked score, wide enough to read its table. The window
        grows by the whole dock (a hidden dock takes no room: grown by only what a hidden dock's 100 px
        lacked, the window's columns gave up the rest and the inspector narrowed to ~250 px, cut), as
        far as its screen allows, and stays on it; when even the window's least width and the dock's
        do not fit beside each other the dock floats beside it."""
        first = not self.isVisible()
        self.show()
        self.raise_()
        window = self.parentWidget()
        if first and window is not None and not self.isFloating():
            room = available_size(window)[0]
            if window.minimumSizeHint().width() + OPEN_WIDTH > room:
                self.setFloating(True)
                self.resize(OPEN_WIDTH, max(400, window.height() * 4 // 5))
                return self
            if not (window.isMaximized() or window.isFullScreen()):
                grow = OPEN_WIDTH + window.style().pixelMetric(QStyle.PixelMetric.PM_DockWidgetSeparatorExtent)
                window.resize(min(room, window.width() + grow), window.height())
                keep_on_screen(window)
            self._resize_to(OPEN_WIDTH)
            self.frames.after_this_turn("why dock remembers", self._remember)
        return self

    # --- its width as the window narrows and widens ----------------------------------------------
    def _resize_to(self, width: int) -> None:
        self.parentWidget().resizeDocks([self], [width], Qt.Orientation.Horizontal)

    def _remember(self) -> None:
        """The dock's width now, and the window's columns', are the ones to keep (opened, or dragged)."""
        window = self.parentWidget()
        if window is not None and self.isVisible() and not self.isFloating():
            if self.width() < self.least_width:  # dragged narrower than its title
                self._resize_to(self.least_width)
            self._chosen = (max(self.width(), self.least_width), window.centralWidget().width())

    def _float(self, floated: bool) -> None:
        """Floated beside the window (as where it opens without room), or docked beside the columns again."""
        window = self.parentWidget()
        self.floated = floated
        self.setFloating(floated)
        if floated:
            self.resize(OPEN_WIDTH, window.height())
            frame = window.frameGeometry()
            self.move(frame.x() + frame.width(), frame.y())
            keep_on_screen(self)
        self.show()

    def _fit(self) -> None:
        """The window resized: the dock gives way first, down to its least width, so that the columns
        keep the width they had (narrowed back from 1,918 to 1,400 px the dock kept its 560 px and the
        inspector went down to 200, behind a scroll bar); widened, it gets its width back first."""
        window = self.parentWidget()
        if self._chosen is None or window is None or not self.isVisible() or (self.isFloating() and not self.floated):
            return
        dock, columns = self._chosen
        separator = window.style().pixelMetric(QStyle.PixelMetric.PM_DockWidgetSeparatorExtent)
        beside = window.centralWidget().minimumSizeHint().width() + separator + self.least_width  # the least room
        if self.floated != (window.width() < beside + (ROOM_AGAIN if self.floated else 0)):
            self._float(not self.floated)
        if self.floated:
            return
        width = max(self.least_width, min(dock, window.width() - columns - separator))
        if width != self.width():
            self._resize_to(width)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt API
        if watched is self.parentWidget():
            if event.type() == QEvent.Type.Resize:
                # once the window's layout has its new width
                self.frames.after_this_turn("why dock fits", self._fit)
            elif event.type() == QEvent.Type.MouseButtonRelease:  # on the window itself: a separator dragged
                # the width chosen by hand is the one kept
                self.frames.after_this_turn("why dock remembers", self._remember)
        return False

    def cell_clicked(self, display, stage, head: int, row: int, col: int) -> None:
        self.clicked = (display, stage, head, row, col)
        self.split_clicked()

    def split_clicked(self) -> None:
        if self.clicked is None or not self.isVisible():
            return  # nothing is computed for a panel nobody sees
        display, stage, head, row, col = self.clicked
        if display is self.state.display:
            self.panel.show_cell(display, stage, head, row, col, self.model_of(display))

    def model_of(self, display):
        """The loaded model that made ``display`` (its run's, models.api.Trace.engine); None: the toy."""
        engine = getattr(getattr(display, "run", None), "engine", None)
        return None if engine is None else lambda: engine

    def open_head(self, layer: int, head: int, position: int, side: str = "query") -> None:
        """Show ``head`` of ``layer``: its weights, its row at ``position`` focused (a click on a head source
        of the ``side``, query or key, in the table), and say which it was with the next summary."""
        self.state.add_notice(f"opened L{layer} H{head}, the {side} source clicked in the Why table: its weights "
                              f"at the {side}'s position {position}")  # fmt: skip
        self.state.update_inputs(layer=layer)
        self.state.set_stage("weights")
        self.state.set_focus_head(head)
        self.state.set_query(position)
