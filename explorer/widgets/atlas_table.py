"""The atlas's table: one row per head (``L3 H7``) and every column of the atlas, sorted in numpy."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt


def head_label(layer: int, head: int) -> str:
    return f"L{layer} H{head}"


class AtlasTableModel(QAbstractTableModel):
    """One row per head: ``head`` then every column of the atlas; sorting reorders rows in numpy."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.atlas = None  # a models.reads.atlas.Atlas
        self.names: list[str] = []
        self.values = np.zeros((0, 0))  # (rows, columns) float64, in the shown order
        self.heads = np.zeros((0, 2), dtype=int)  # (rows, 2): layer, head of each shown row

    def set_atlas(self, atlas) -> None:
        self.beginResetModel()
        self.atlas = atlas
        if atlas is None:
            self.names, self.values, self.heads = [], np.zeros((0, 0)), np.zeros((0, 2), dtype=int)
        else:
            self.names = list(atlas.columns)
            self.values = np.stack([atlas.columns[c].ravel() for c in self.names], axis=1)
            layers, heads = np.divmod(np.arange(atlas.layers * atlas.heads), atlas.heads)
            self.heads = np.stack([layers, heads], axis=1)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802,B008 - Qt API
        return 0 if parent.isValid() else len(self.values)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802,B008
        return 0 if parent.isValid() else 1 + len(self.names)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return "head" if section == 0 else self.names[section - 1]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role != Qt.ItemDataRole.DisplayRole or not index.isValid():
            return None
        r, c = index.row(), index.column()
        if c == 0:
            return head_label(*self.heads[r])
        v = self.values[r, c - 1]
        return "—" if np.isnan(v) else f"{v:.4g}"

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        if not len(self.values):
            return
        self.layoutAboutToBeChanged.emit()
        if column == 0:
            key = self.heads[:, 0] * 10_000 + self.heads[:, 1]
        else:
            key = np.nan_to_num(self.values[:, column - 1], nan=-np.inf)
        order_ = np.argsort(key, kind="stable")
        if order == Qt.SortOrder.DescendingOrder:
            order_ = order_[::-1]
        self.values, self.heads = self.values[order_], self.heads[order_]
        self.layoutChanged.emit()
