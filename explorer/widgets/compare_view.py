"""The compare panel: the pinned run, the current run and current − pinned, side by side.

Handed a :class:`explorer.engine.compare.Comparison` (already converted to colour indices); paints it and
never computes. The two runs share one colour scale; the difference has its own, centred on 0.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.widgets.colormaps import colour_map, lookup_table
from explorer.widgets.heatmap_plot import HeatmapPlot
from explorer.widgets.labels import rich_safe
from explorer.widgets.token_axis import axis_title
from explorer.widgets.zoom_regions import device_pixels


class CompareView(QWidget):
    resized = Signal()  # its matrices cover other device pixels now: reduce the comparison to them again

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("compareView")
        self.heading = QLabel()
        self.heading.setObjectName("compareHeading")
        self.heading.setWordWrap(True)
        self.message = QLabel()
        self.message.setObjectName("compareMessage")
        self.message.setWordWrap(True)
        self.largest = QLabel()
        self.largest.setObjectName("compareLargest")
        self.largest.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.plots = [HeatmapPlot(0) for _ in range(3)]  # pinned, current, difference
        self.bars = [pg.ColorBarItem(values=(0, 1), colorMap=colour_map(True), interactive=False,
                                     colorMapMenu=False, width=14) for _ in range(2)]  # fmt: skip
        for col, item in enumerate([self.plots[0].plot, self.plots[1].plot, self.bars[0],
                                    self.plots[2].plot, self.bars[1]]):  # fmt: skip
            self.canvas.addItem(item, 0, col)
            # The three matrices share the width alike (the difference took half as much again, and
            # the runs' 14 key labels no longer fitted upright); the colour bars keep their own.
            self.canvas.ci.layout.setColumnStretchFactor(col, 0 if col in (2, 4) else 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.heading)
        layout.addWidget(self.message)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.largest)
        self.comparison = None
        # The matrices' own area, not the window: it also changes when a label or the heading
        # changes height or the axes their width, and the comparison must follow it.
        self._side = None
        self.plots[1].plot.getViewBox().sigResized.connect(self._matrix_resized)

    def device_side(self) -> tuple[int, int] | None:
        """(rows, cols) of device pixels a run's matrix covers, or None before the first layout."""
        rows, cols = device_pixels(self.plots[1], self.devicePixelRatioF())
        return (rows, cols) if rows > 8 and cols > 8 else None

    def _matrix_resized(self, *_args) -> None:
        side = self.device_side()
        if side is not None and side != self._side:  # once per new size: never a loop of refreshes
            self._side = side
            self.resized.emit()

    def show_comparison(self, comparison, what_changed: str) -> None:
        """Paint ``comparison`` (pinned, current, difference); ``what_changed`` heads the panel."""
        self.comparison = comparison
        head = f" · head {comparison.head}" if comparison.pinned is not None else ""
        changed = f"<span style='color:#555'>changed since pinned: {rich_safe(what_changed)}</span>"
        self.heading.setText(f"<b>{rich_safe(comparison.title)}</b>{head} &nbsp; {changed}")
        self.message.setText(rich_safe(comparison.message))
        self.message.setStyleSheet("color:#a33" if comparison.message else "")
        self.message.setVisible(bool(comparison.message))
        self.largest.setText(rich_safe(comparison.largest_text()))
        images = (comparison.pinned, comparison.current, comparison.difference)
        labels = (comparison.pinned_labels, comparison.current_labels, comparison.current_labels)
        kinds = (comparison.pinned_axes, comparison.current_axes, comparison.current_axes)
        names = ("pinned", "current", "current − pinned")
        for plot, image, (rows, cols), (row_axis, col_axis, cross), name in zip(
                self.plots, images, labels, kinds, names, strict=True):  # fmt: skip
            plot.plot.setVisible(image is not None)
            if image is not None:  # the main view's axes: "query i", "key j" (which sentence, if cross)
                axes = (axis_title(row_axis, cross), axis_title(col_axis, cross))
                plot.set_matrix(image.indices[0], lookup_table(image.sequential), rows, cols, name, axes)
        for bar, image in zip(self.bars, (comparison.current, comparison.difference)):
            bar.setVisible(image is not None)
            if image is not None:
                bar.setColorMap(colour_map(image.sequential))
                bar.setLevels(image.levels)
