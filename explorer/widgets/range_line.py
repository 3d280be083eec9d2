"""The line above the heatmaps (the values' range, the colours of NaN and masked cells, how many
cells a screen pixel holds): one line where the view is wide, two, wrapped, where it is narrow.

Its text changes with every result and must never resize the heatmaps (a new height lays every
one out and paints it again: the 40–130 ms stalls of a seed change), so its height follows its
width only, never the length of its text. In a window half a 1920 px screen wide the line was cut
at the left (it is right-aligned): the range itself was lost.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy

ONE_LINE = 640  # px: narrower than this, the line has two
# The hover line under the heatmaps ("Head 11 (kv 3) · row 1234 <token> · col 567 <token> = 0.012345678", ~450 px):
# at half a 1920 px screen it was cut at the right, the value lost. (720 px took a line from the heatmaps at 1400.)
READOUT_ONE_LINE = 640


class RangeLine(QLabel):
    """A line of changing text whose height follows its width only: one line at ``one_line`` px and
    wider, two (wrapped) below."""

    def __init__(self, name: str = "rangeLabel", align=Qt.AlignmentFlag.AlignRight, one_line: int = ONE_LINE):
        super().__init__()
        self.one_line = one_line
        self.setObjectName(name)
        self.setWordWrap(True)
        self.setAlignment(align | Qt.AlignmentFlag.AlignVCenter)
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def lines(self, width: int) -> int:
        return 1 if width >= self.one_line else 2

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt API
        margins = self.contentsMargins()
        return self.lines(width) * self.fontMetrics().lineSpacing() + margins.top() + margins.bottom()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(1, self.heightForWidth(self.width()))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(1, self.heightForWidth(1))

    def resizeEvent(self, event):  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if self.lines(event.size().width()) != self.lines(event.oldSize().width()):
            self.updateGeometry()  # one line or two: the layout asks again
