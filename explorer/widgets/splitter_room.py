"""Room for a splitter's second pane: a panel that just got something to show (a clicked cell's
derivation) is given the height it needs, up to a share of the splitter, from the pane above."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QWidget


def content_height(widget: QWidget, width: int) -> int:
    """The height ``widget`` asks for at ``width`` (its wrapped labels included), never below its least
    height: a scroll area gives its widget that much, and a layout's least height (each wrapped label
    at its narrowest) can exceed its height for the width. Measured at heightForWidth alone, the
    inspector was given 616 px of the 677 it took: its last 61 px, the value's line, were cut."""
    wanted = widget.heightForWidth(width) if widget.hasHeightForWidth() else widget.sizeHint().height()
    return max(wanted, widget.minimumSizeHint().height())


def give_room(splitter: QSplitter, wanted: int, share: float = 0.6) -> bool:
    """Make the second pane at least ``min(wanted, share × the splitter)`` px tall, taking the height
    from the first pane down to its minimum; True when the sizes changed."""
    first, second = splitter.sizes()
    want = min(wanted, int((first + second) * share))
    if second >= want:
        return False
    least = max(splitter.widget(0).minimumSizeHint().height(), splitter.widget(0).minimumHeight())
    moved = min(want - second, max(0, first - least))
    if moved <= 0:
        return False
    splitter.setSizes([first - moved, second + moved])
    return True


MIDDLE_WANTS = 560  # px: below this the middle pane (the heatmaps) takes room from the side panes first


class MiddleFirst(QSplitter):
    """Three panes side by side; as the window narrows the middle one gives way first, as a
    stretch factor of (0, 1, 0) does, but never past :data:`MIDDLE_WANTS` while a side pane is
    wider than its minimum (at half a 1920 px screen the heatmaps had 394 px, the side panes 280
    each); widened again, the side panes get back what they gave."""

    def __init__(self, orientation: Qt.Orientation, parent: QWidget | None = None):
        super().__init__(orientation, parent)
        self._sides: tuple[int, int] | None = None  # the side panes' widths while the middle had room
        self.splitterMoved.connect(lambda *_: self._remember(force=True))  # a hand's choice

    def _remember(self, force: bool = False) -> None:
        left, middle, right = self.sizes()
        if force or middle >= MIDDLE_WANTS and (self._sides is None or (left, right) >= self._sides):
            self._sides = (left, right)

    def resizeEvent(self, event):  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if self.count() != 3 or self.orientation() != Qt.Orientation.Horizontal:
            return
        left, middle, right = self.sizes()
        if middle >= MIDDLE_WANTS:  # room: the side panes get back the width they had, from what is over
            owed = [max(0, had - now) for had, now in zip(self._sides or (0, 0), (left, right), strict=True)]
            over = middle - MIDDLE_WANTS
            back = [min(o, over * o // sum(owed)) for o in owed] if sum(owed) else [0, 0]
            if sum(back):
                self.setSizes([left + back[0], middle - sum(back), right + back[1]])
            self._remember()
            return
        least = [max(self.widget(i).minimumSizeHint().width(), self.widget(i).minimumWidth()) for i in (0, 2)]
        spare = [max(0, left - least[0]), max(0, right - least[1])]
        wanted = min(MIDDLE_WANTS - middle, sum(spare))
        if wanted > 0:
            lend = wanted * spare[0] // sum(spare)
            self.setSizes([left - lend, middle + wanted, right - (wanted - lend)])


def hold_least_height(canvas) -> int:
    """A pyqtgraph canvas (GraphicsLayoutWidget) at least as tall as its plots' layout needs (each view
    box's minimum height, its axes and titles): a QGraphicsView never asks its scene's layout, so a
    canvas in a short row squeezed its plots to a few pixels rather than make the row (and its scroll
    area) taller. Returns the minimum set."""
    least = canvas.ci.effectiveSizeHint(Qt.SizeHint.MinimumSize).height()
    frame = canvas.frameWidth() * 2
    wanted = int(least + 0.999) + frame
    if canvas.minimumHeight() != wanted:
        canvas.setMinimumHeight(wanted)
    return wanted
