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

MARGIN = 6  # px around the column's panels


class PanelScroll(QScrollArea):
    """Scrolls its panels up and down, never sideways: its minimum width is theirs (with the scroll
    bar's), followed as they change (a model's longer texts), so no panel is ever cut at the right."""

    def __init__(self, inner: QWidget):
        super().__init__()
        self.setWidget(inner)
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        inner.installEventFilter(self)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        inner = self.widget().minimumSizeHint()
        return QSize(inner.width() + self.verticalScrollBar().sizeHint().width(), min(inner.height(), 120))

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()  # the panels' minimum may have changed: the splitter asks again
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
