"""A row of controls that wraps onto a second line when the view is narrow (a window half a 1920 px
screen wide), instead of making the window at least as wide as all of them side by side.

superqt's QFlowLayout (Qt's flow layout example) lays out hidden widgets too and gives every item
its size hint only; here a hidden control takes no room, and a text that must never widen the view
(Ignored horizontal policy: the largest change of an edit) takes what is left of its line, and
no room at all while it is empty.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLayout, QLayoutItem, QSizePolicy, QWidget

GAP = 8  # px between controls on a line
LINE_GAP = 4  # px between lines
FILL_LEAST = 120  # px: a filling text narrower than this starts a line of its own


def labelled(text: str, control: QWidget) -> QWidget:
    """``text`` and ``control`` side by side, kept on one line (``Show: [All heads]``)."""
    pair = QWidget()
    row = QHBoxLayout(pair)
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(QLabel(text))
    row.addWidget(control)
    return pair


class ControlRow(QLayout):
    """Controls left to right at their preferred widths, wrapping as words do."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._height_for: tuple[int, int] | None = None  # (width, height) until the layout is invalidated

    def invalidate(self) -> None:  # Qt calls it when a control's size hint, text or visibility changes
        self._height_for = None
        super().invalidate()

    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 - Qt API
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt API
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt API
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:  # noqa: N802 - Qt API
        return Qt.Orientation.Horizontal

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt API
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt API
        if self._height_for is None or self._height_for[0] != width:  # asked many times per layout pass
            self._height_for = (width, self._place(QRect(0, 0, width, 0), move=False))
        return self._height_for[1]

    def minimumSize(self) -> QSize:  # noqa: N802 - Qt API
        size = QSize(0, 0)
        for item in self._shown():
            size = size.expandedTo(item.minimumSize() if _fills(item) else _preferred(item))
        margins = self.contentsMargins()
        return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        shown = self._shown()
        width = sum(_preferred(item).width() for item in shown if not _fills(item)) + GAP * max(0, len(shown) - 1)
        return QSize(width, self.heightForWidth(width))

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt API
        super().setGeometry(rect)
        shown = self._shown()
        for item in self._items:
            if item not in shown and not item.isEmpty():  # a blank text: nowhere, never over a control
                item.setGeometry(QRect(rect.topLeft(), QSize(0, 0)))
        self._place(rect, move=True)

    def _shown(self) -> list[QLayoutItem]:
        """The items that take room: not hidden, and not a filling text with nothing to say (the
        largest change, outside the difference view: it took a blank line under the controls)."""
        return [item for item in self._items if not item.isEmpty() and not (_fills(item) and _blank(item))]

    def _place(self, rect: QRect, move: bool) -> int:
        """Lay the items out in ``rect`` (when ``move``), each centred on its line; the height they take."""
        margins = self.contentsMargins()
        area = rect.adjusted(margins.left(), margins.top(), -margins.right(), -margins.bottom())
        lines: list[list[tuple[QLayoutItem, int, int]]] = [[]]  # (item, x, width) per line
        x = area.x()
        for item in self._shown():
            fills = _fills(item)
            width = FILL_LEAST if fills else min(_preferred(item).width(), area.width())
            if lines[-1] and x + width > area.right() + 1:  # not the first on its line, and past its end
                lines.append([])
                x = area.x()
            if fills:
                width = max(1, area.right() + 1 - x)
            lines[-1].append((item, x, width))
            x += width + GAP
        y = area.y()
        for line in lines:
            height = max((_preferred(item).height() for item, _x, _w in line), default=0)
            for item, x, width in line if move else ():
                own = min(_preferred(item).height(), height)
                item.setGeometry(QRect(x, y + (height - own) // 2, width, own))
            y += height + LINE_GAP
        return max(0, y - LINE_GAP - area.y()) + margins.top() + margins.bottom()


def _preferred(item: QLayoutItem) -> QSize:
    return item.sizeHint().expandedTo(item.minimumSize())


def _blank(item: QLayoutItem) -> bool:
    widget = item.widget()
    return isinstance(widget, QLabel) and not widget.text()


def _fills(item: QLayoutItem) -> bool:
    widget = item.widget()
    return widget is not None and widget.sizePolicy().horizontalPolicy() == QSizePolicy.Policy.Ignored
