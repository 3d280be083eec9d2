"""The window's left column: what to compute (model, sentence, settings) above, scrolling when the
window is short, and the list of stages below it, always whole.

The stages were the last panel of one scrolling column: with a font of larger line height (Noto
Sans: 1.36 em, DejaVu Sans: 1.16 em) the panels above pushed the list past the bottom of a 900 px
window and it was cut after stage 10. Now the list is as tall as its rows (widgets/stage_list.py
measures them in the font it draws with) and the panels above give way: they scroll.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import QScrollArea, QVBoxLayout, QWidget

from explorer.widgets.frames import debounced

MARGIN = 6  # px around the column's panels


class PanelScroll(QScrollArea):
    """Scrolls its panels up and down, never sideways: its minimum width is theirs (with the scroll
    bar's), followed as they change (a model's longer texts), so no panel is ever cut at the right.

    A wider minimum is followed at once; a narrower one once it has held for the "shrink after" delay. A model's
    texts go and come back as models are switched ("Loading…", then its facts): followed both ways at
    once, the whole window was laid out again twice per change, heatmaps included (a step of the
    training timeline: 35 -> 60 ms at the window's least width)."""

    def __init__(self, inner: QWidget):
        super().__init__()
        self.setWidget(inner)
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._told = 0  # the least width last given to the layouts
        self._shrink = debounced(self._follow, "shrink after", self)
        inner.installEventFilter(self)

    def _least(self) -> int:
        return self.widget().minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        self._told = self._least()
        return QSize(self._told, min(self.widget().minimumSizeHint().height(), 120))

    def _follow(self) -> None:
        if self._least() != self._told:
            self.updateGeometry()  # the splitter asks again

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Type.LayoutRequest:  # the panels' minimum may have changed
            least = self._least()
            if least > self._told:
                self._shrink.cancel()
                self.updateGeometry()
            elif least < self._told:
                self._shrink()
        return super().eventFilter(watched, event)


def left_column(panels: list[QWidget], stages: QWidget) -> QWidget:
    """``panels`` one above the other in a vertical scroll area (never a horizontal one: the column is
    as wide as the widest panel's minimum), then ``stages`` at the height it asks for."""
    inner = QWidget()
    stack = QVBoxLayout(inner)
    stack.setContentsMargins(MARGIN, MARGIN, MARGIN, 0)
    for panel in panels:
        stack.addWidget(panel)
    stack.addStretch(1)
    scroll = PanelScroll(inner)
    column = QWidget()
    layout = QVBoxLayout(column)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(0)
    layout.addWidget(scroll, 1)
    below = QVBoxLayout()
    below.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
    below.addWidget(stages)
    layout.addLayout(below)
    return column
