"""One heatmap: a uint8 ImageItem in a ViewBox with token axes, a title and a query-row marker.

Not a widget: MatrixView lays several of these out in one GraphicsLayoutWidget (one per head).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtWidgets import QGraphicsGridLayout, QSizePolicy

from explorer.widgets.labels import rich_safe
from explorer.widgets.long_overlay import show_structure
from explorer.widgets.row_outline import RowOutline
from explorer.widgets.token_axis import TokenAxis

FULL_INDEX_RANGE = (0, 255)  # uint8 indices map straight onto the 256-entry lookup table
AXIS_CELLS = {"left": (1, 0), "bottom": (2, 1)}  # (row, column) of each token axis in a plot's layout


class MatrixPlotItem(pg.GraphicsWidget):
    """The part of pyqtgraph's PlotItem a heatmap uses, laid out as PlotItem does (title above,
    token axes left and below a ViewBox) and with its names (getViewBox, showAxis, addItem,
    removeItem, layout, titleLabel), at well under half the cost to build (6 ms against 15 ms
    measured): a PlotItem also builds its control panel, menus, buttons and two more axes, and a
    model switch builds a dozen plots."""

    def __init__(self, left: TokenAxis, bottom: TokenAxis):
        super().__init__()
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.layout = QGraphicsGridLayout()
        self.layout.setContentsMargins(1, 1, 1, 1)
        self.layout.setHorizontalSpacing(0)
        self.layout.setVerticalSpacing(0)
        self.setLayout(self.layout)
        self.vb = pg.ViewBox(parent=self, enableMenu=False, invertY=True, defaultPadding=0.0)
        self.axes = {"left": left, "bottom": bottom}
        self.titleLabel = pg.LabelItem("", size="9pt", parent=self)
        _keep_title_hint_on_resize(self.titleLabel)
        for item, row, col in ((self.titleLabel, 0, 1), (self.vb, 1, 1), (left, *AXIS_CELLS["left"]),
                               (bottom, *AXIS_CELLS["bottom"])):  # fmt: skip
            self.layout.addItem(item, row, col)
        self._laid_out = {"left": True, "bottom": True}  # the axes in the layout (the shown ones)
        for axis in (left, bottom):
            axis.linkToView(self.vb)
            axis.setZValue(-1000)  # under the view, as in a PlotItem
        for i in range(3):  # as PlotItem: nothing but the view grows
            self.layout.setRowPreferredHeight(i, 0)
            self.layout.setRowMinimumHeight(i, 0)
            self.layout.setColumnPreferredWidth(i, 0)
            self.layout.setColumnMinimumWidth(i, 0)
        self.layout.setRowStretchFactor(1, 100)
        self.layout.setColumnStretchFactor(1, 100)
        self.titleLabel.setMaximumHeight(30)
        self.layout.setRowFixedHeight(0, 30)

    def getViewBox(self) -> pg.ViewBox:  # noqa: N802 - pyqtgraph's name
        return self.vb

    def showAxis(self, name: str, show: bool = True) -> None:  # noqa: N802 - pyqtgraph's name
        """Show or hide a token axis, and put it in the layout or take it out: hidden, it still counted
        in the plot's minimum height (a 16,384-token grid labelled under its bottom plots only: 174 px
        with the key labels hidden, 56 px with them taken out), and the grid, short of height, gave
        each plot its minimum: no room was left for the map (tests/explorer/test_long_window.py)."""
        axis = self.axes[name]
        axis.setVisible(show)
        if show != self._laid_out[name]:
            self._laid_out[name] = show
            if show:
                self.layout.addItem(axis, *AXIS_CELLS[name])
            else:
                self.layout.removeItem(axis)

    def addItem(self, item) -> None:  # noqa: N802 - pyqtgraph's name
        self.vb.addItem(item)

    def removeItem(self, item) -> None:  # noqa: N802 - pyqtgraph's name
        self.vb.removeItem(item)

    def set_title(self, title: str) -> None:
        self.titleLabel.setText(rich_safe(title), size="9pt")


class HeatmapPlot:
    def __init__(self, head: int):
        self.head = head  # which head of a per-head stage this plot shows (0 for 2-D stages)
        self.left = TokenAxis("left")
        self.bottom = TokenAxis("bottom")
        self.plot = MatrixPlotItem(self.left, self.bottom)
        # Per-item row-major order (never the global option): indices[row, col] as in numpy.
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        # The focused query row: white then black just outside its cells, at any zoom (row_outline).
        self.row_marker = RowOutline()
        self.row_marker.setZValue(10)
        self.row_marker.hide()
        self.plot.addItem(self.row_marker)
        self.rows = self.cols = 0
        self.region: tuple[int, int, int, int] | None = None  # a region painted at the plot's own pixels
        self.painted_key: tuple | None = None  # what ZoomRegions asked for the region on screen
        self.painted_step: tuple[int, int] = (1, 1)  # cells per pixel of the image on screen
        self.title = ""
        self._frame_cells = (0, 0)  # the rows and columns set_frame laid the plot out for
        self._image_cells: tuple = ()  # (rows, cols, image shape) the image's rectangle was set for
        self.long_overlay = None  # a long input's structure (explorer.widgets.long_overlay), built when shown

    def framed(self, rows: tuple[str, ...], cols: tuple[str, ...], title: str,
               axes: tuple[str, str] | None = None) -> bool:  # fmt: skip
        """Whether the plot already has these labels, titles and cell grid (set_frame would do nothing)."""
        return (self.left.labels, self.bottom.labels, self.title) == (tuple(rows), tuple(cols), title) and (
            axes is None or (self.left.title, self.bottom.title) == tuple(axes))  # fmt: skip

    def set_frame(self, rows: tuple[str, ...], cols: tuple[str, ...], title: str,
                  axes: tuple[str, str] | None = None) -> None:  # fmt: skip
        """What lays the plot out: its labels, titles and cell grid (a new grid's first fill, or a new
        sentence, sets it in a turn of its own before the images: set_matrix)."""
        resized = (len(rows), len(cols)) != self._frame_cells
        self._frame_cells = (len(rows), len(cols))
        if axes is not None:  # the axis titles ("query i", "key j") before the labels: they take room
            self.left.set_title(axes[0])
            self.bottom.set_title(axes[1])
        self.left.set_labels(rows)
        self.bottom.set_labels(cols)
        self.set_title(title)
        if resized:
            self.plot.getViewBox().setRange(xRange=(0, len(cols)), yRange=(0, len(rows)), padding=0)

    def set_matrix(
        self, indices: np.ndarray, lut: np.ndarray, rows: tuple[str, ...], cols: tuple[str, ...], title: str,
        axes: tuple[str, str] | None = None, structure=None,
    ) -> None:
        """Paint ``indices`` (possibly subsampled) over the full ``len(rows) × len(cols)`` cell grid;
        ``structure``: a long input's band edges, sinks and sink share drawn with it (or None)."""
        self.set_frame(rows, cols, title, axes)
        if structure is not None or self.long_overlay is not None:
            show_structure(self, structure, self.head)
        self.rows, self.cols = len(rows), len(cols)  # the image's cells (hover, numbers): set with it
        self._set_image(indices, lut)
        self.painted_key = None
        self.painted_step = (-(-self.rows // max(1, indices.shape[0])), -(-self.cols // max(1, indices.shape[1])))
        # The rectangle is in cell units whatever the image resolution, so that hover and click map
        # to exact rows and columns even when the image was subsampled. Set only when it changes:
        # geometry changes re-lay out the whole grid and cost a second paint.
        if (self.rows, self.cols, indices.shape) != self._image_cells or self.region is not None:
            self.region = None
            self._image_cells = (self.rows, self.cols, indices.shape)
            self.image.setRect(QRectF(0, 0, self.cols, self.rows))

    def set_region(self, indices: np.ndarray, lut: np.ndarray, region: tuple[int, int, int, int]) -> None:
        """Paint a zoomed region (rows r0:r1, cols c0:c1) reduced again from the exact values."""
        r0, r1, c0, c1 = region
        self.region = region
        self._set_image(indices, lut)
        self.image.setRect(QRectF(c0, r0, c1 - c0, r1 - r0))

    def _set_image(self, indices: np.ndarray, lut: np.ndarray) -> None:
        """The image, made into a QImage now (pyqtgraph would in the paint: ~0.5 ms a heatmap, in the
        one turn that paints the whole grid)."""
        self.image.setImage(indices, autoLevels=False, levels=FULL_INDEX_RANGE, lut=lut)
        self.image.render()

    def set_title(self, title: str) -> None:
        if title != self.title:  # the title's HTML takes ~1 ms to lay out, and resizes the plot
            self.title = title
            self.plot.set_title(title)

    def mark_row(self, row: int) -> None:
        if 0 <= row < self.rows:
            self.row_marker.setRect(QRectF(0, row, self.cols, 1))
            self.row_marker.show()
        else:
            self.row_marker.hide()

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """The (row, col) under a scene position, or None outside the matrix."""
        view = self.plot.getViewBox()
        if not view.sceneBoundingRect().contains(scene_pos):
            return None
        point = view.mapSceneToView(scene_pos)
        row, col = int(np.floor(point.y())), int(np.floor(point.x()))
        if 0 <= row < self.rows and 0 <= col < self.cols:
            return row, col
        return None


def _keep_title_hint_on_resize(label: pg.LabelItem) -> None:
    """pyqtgraph's LabelItem recomputes its size hint on every resize and invalidates the plot's
    layout even though the hint depends only on its text: each grid layout then posts a layout
    request per plot, whose handling (after the paint) lays out the whole grid again. Here the
    layout is only invalidated when the hint really changed (new text, angle)."""
    update_min = label.updateMin

    def update_min_if_changed() -> None:
        bounds = label.itemRect()
        hint = getattr(label, "_sizeHint", {}).get(Qt.SizeHint.PreferredSize)
        if hint != (bounds.width(), bounds.height()):
            update_min()

    label.updateMin = update_min_if_changed
