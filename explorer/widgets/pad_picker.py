"""Clickable key tokens for the padding mask: a checked token is hidden from every query."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QListView, QListWidget, QListWidgetItem, QWidget
from superqt.utils import signals_blocked

from explorer.widgets.labels import display_label


class PadPicker(QListWidget):
    positions_changed = Signal(tuple)  # the checked key positions, ascending

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(True)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setSpacing(2)
        self.setUniformItemSizes(False)
        self.setToolTip("Click key tokens to hide them (padding mask)")
        self.setMaximumHeight(96)
        self._tokens: tuple[str, ...] = ()
        self.itemChanged.connect(lambda _item: self.positions_changed.emit(self.positions()))
        self.itemClicked.connect(self._toggle)

    def set_tokens(self, tokens: tuple[str, ...], checked: tuple[int, ...]) -> None:
        with signals_blocked(self):
            if tokens != self._tokens:
                self.clear()
                for i, token in enumerate(tokens):
                    item = QListWidgetItem(f"{i}:{display_label(token, self.font())}")  # code points, never boxes
                    # Not user-checkable: _toggle handles every click, on the box or on the word.
                    item.setFlags(Qt.ItemFlag.ItemIsEnabled)
                    item.setSizeHint(QSize(self.fontMetrics().horizontalAdvance(item.text()) + 30, 22))
                    self.addItem(item)
                self._tokens = tuple(tokens)
                # Now rather than from a posted event after the window has painted (which would
                # re-lay out the panels and paint again).
                self.executeDelayedItemsLayout()
            hidden = set(checked)
            for i in range(self.count()):
                state = Qt.CheckState.Checked if i in hidden else Qt.CheckState.Unchecked
                item = self.item(i)
                # Each change re-lays out the list: only on a change (a new item has no box yet).
                if item.data(Qt.ItemDataRole.CheckStateRole) is None or item.checkState() != state:
                    item.setCheckState(state)

    def positions(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.count()) if self.item(i).checkState() == Qt.CheckState.Checked)

    def _toggle(self, item: QListWidgetItem) -> None:
        checked = item.checkState() == Qt.CheckState.Checked
        item.setCheckState(Qt.CheckState.Unchecked if checked else Qt.CheckState.Checked)
