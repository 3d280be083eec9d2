"""The head metrics table: one row per (layer, head), sortable by any column.

A QTableView over a QStandardItemModel behind a QSortFilterProxyModel that sorts on the
exact numbers (``SORT_ROLE``), not on the text shown. NaN (a metric with no meaning for this
attention, e.g. ``self`` of cross attention) shows as "—" and sorts last.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QVBoxLayout, QWidget

SORT_ROLE = Qt.ItemDataRole.UserRole
TOOLTIPS = {
    "entropy": "mean over query rows of −Σ a ln a (natural log): high = spread out",
    "max_weight": "mean over query rows of the largest weight: high = sharp",
    "self": "mean weight of a token on itself",
    "previous": "mean weight on the previous token (rows 1..n−1)",
    "first": "mean weight on the first token",
    "distance": "mean over rows of Σ a_ij |i − j|: how far a head looks",
    "sink": "mean weight on the sequence's first token over rows 1..n−1: an attention sink",
}


class HeadMetricsModel(QStandardItemModel):
    """The numbers as Qt items: the table reads and sorts them in C++. A Python ``data()`` was
    called some ten times per cell and paint (the roles a delegate asks for): 6,800 calls, ~90 ms
    on the GUI thread each time a survey's 72 rows arrived."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.names: list[str] = []
        self.values = np.zeros((0, 0))  # (rows, metrics)
        self.keys = np.zeros((0, 2), int)  # (rows, 2): layer, head

    def set_metrics(self, metrics: dict[str, np.ndarray]) -> None:
        self.names = list(metrics)
        first = next(iter(metrics.values()), np.zeros((0, 0)))
        layers, heads = first.shape
        self.keys = np.array([(l, h) for l in range(layers) for h in range(heads)], int).reshape(-1, 2)  # noqa: E741
        self.values = np.stack([np.asarray(metrics[n], float).reshape(-1) for n in self.names], axis=1) \
            if self.names else np.zeros((0, 0))  # fmt: skip
        self.clear()
        self.setHorizontalHeaderLabels(["layer", "head", *self.names])
        for column, name in enumerate(self.names, start=2):
            self.setHeaderData(column, Qt.Orientation.Horizontal, TOOLTIPS.get(name, ""), Qt.ItemDataRole.ToolTipRole)
        # Set through indexes: never a Python wrapper of an item. Once (CI) a later window's widget came
        # back from children() as a QStandardItem, the only kind of item made here: a stale wrapper. How
        # it outlived its item is not known (clear() and deleting the model both invalidate them).
        self.setRowCount(len(self.keys))
        right = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        for r, (keys, values) in enumerate(zip(self.keys.tolist(), self.values.tolist(), strict=True)):
            cells = [(k, k) for k in keys] + [("—", math.inf) if math.isnan(v) else (metric_text(v), v) for v in values]
            for c, (text, key) in enumerate(cells):
                self.setItemData(self.index(r, c), {Qt.ItemDataRole.DisplayRole: text, SORT_ROLE: key,
                                                    Qt.ItemDataRole.TextAlignmentRole: right})  # fmt: skip


def metric_text(value: float) -> str:
    """Four decimals, never "−0.0000": a value that rounds to zero is 0.0000 (entropy of a one-hot head)."""
    text = f"{value:.4f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


class HeadMetricsTable(QWidget):
    head_chosen = Signal(int, int)  # layer, head of the row clicked
    sorted_by = Signal(str, bool)  # the column now sorted by ("": layer, head order), descending

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = HeadMetricsModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # layer, head order until a header is clicked
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(20)
        header = self.view.horizontalHeader()
        header.setStretchLastSection(True)  # the last column takes what is left
        header.setMinimumSectionSize(header.fontMetrics().horizontalAdvance("0.0000") + 12)
        self.view.clicked.connect(self._clicked)
        header.sortIndicatorChanged.connect(self._sorted)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view)

    def set_metrics(self, metrics: dict[str, np.ndarray]) -> None:
        self.model.set_metrics(metrics)
        header = self.view.horizontalHeader()
        metrics_ = header.fontMetrics()
        for column, name in ((0, "layer"), (1, "head")):  # as narrow as their titles and numbers
            # Fixed widths from the font, not ResizeToContents: that measures every row on each paint.
            width = metrics_.horizontalAdvance(name) + 14
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(column, width)
        # Every title whole ("max_weight" was cut to "ax_weig"), as in a spreadsheet: the columns keep
        # that width (the user may drag them) and the table scrolls sideways when it is narrower.
        number = metrics_.horizontalAdvance("0.0000")
        for column, name in enumerate(self.model.names, start=2):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(column, max(number, metrics_.horizontalAdvance(name)) + 14)

    def sort_by(self, name: str, descending: bool = True) -> None:
        """Sort by the column ``name`` ("": the layer, head order); a name this table lacks changes nothing."""
        names = ["layer", "head"] + self.model.names
        if name and name not in names:
            return
        order = Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder
        self.view.sortByColumn(names.index(name) if name else -1, order)

    def sorting(self) -> tuple[str, bool]:
        """(the column sorted by, "" for the layer, head order; descending)."""
        header = self.view.horizontalHeader()
        column, names = header.sortIndicatorSection(), ["layer", "head"] + self.model.names
        name = names[column] if 0 <= column < len(names) else ""
        return name, name != "" and header.sortIndicatorOrder() == Qt.SortOrder.DescendingOrder

    def _sorted(self, *_) -> None:
        self.sorted_by.emit(*self.sorting())

    def shown_rows(self) -> list[tuple[int, int]]:
        """(layer, head) of each row in the order shown."""
        rows = []
        for r in range(self.proxy.rowCount()):
            source = self.proxy.mapToSource(self.proxy.index(r, 0)).row()
            rows.append(tuple(int(v) for v in self.model.keys[source]))
        return rows

    def _clicked(self, index) -> None:
        layer, head = self.model.keys[self.proxy.mapToSource(index).row()]
        self.head_chosen.emit(int(layer), int(head))
