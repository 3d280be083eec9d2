"""The model view: every layer × head as a small thumbnail, plus a layers × heads heat table.

All thumbnails are ONE uint8 ImageItem (a mosaic with a 256-entry lookup table), so a 12 × 12
model paints as one image and the event loop stays free. Layers are rows (layer 0 at the top),
heads are columns, both 0-based like heads.csv. Beside it, the heat table colours each (layer,
head) by the metric chosen in the combo box. Hover shows layer, head and the metric; a click on
either emits :attr:`ModelView.head_chosen`.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from explorer.images.thumbnails import EMPTY_INDEX, GAP, THUMB, thumbnail_indices, thumbnail_shape, tile_side
from explorer.widgets.cell_axis import CellAxis, head_cells, layer_cells
from explorer.widgets.colormaps import lookup_table
from explorer.widgets.frames import debounced
from explorer.widgets.head_metrics_table import metric_text
from explorer.widgets.scale_bar import DEFAULT_MIN_SPAN, MIN_SPAN, fit_label, levels_with_span, scale_bar
from explorer.widgets.splitter_room import hold_least_height
from explorer.widgets.token_axis import TEXT_RGB

TICK_PX = 4  # axis ticks point out of the mosaic and the table, never over their pixels
TABLE_ROW_PX = 18  # the heat table's least row height where the thumbnails keep theirs (least_side)
EMPTY_RGB = (236, 236, 236)  # gaps and layers not computed yet
METRIC_MAP = "CET-L17"  # (light) orange -> dark: distinct from the thumbnails' viridis
UNITS = {"entropy": "entropy (nats)", "distance": "distance (tokens)"}  # the rest: weights, 0 to 1
METRIC_MAP_FROM = 0.15  # its first 15 % (white, near white) left out: a head at the minimum is not white on white


def _mosaic_lut() -> np.ndarray:
    lut = np.array(lookup_table(True), copy=True)
    lut[EMPTY_INDEX] = EMPTY_RGB
    return lut


def _cell_axes() -> dict[str, CellAxis]:
    return {side: CellAxis(side) for side in ("left", "top")}


def metric_colour_map() -> pg.ColorMap:
    """METRIC_MAP without its white end: every value is a colour on the white canvas."""
    colours = pg.colormap.get(METRIC_MAP).getLookupTable(nPts=256, alpha=False)[int(256 * METRIC_MAP_FROM):]
    return pg.ColorMap(np.linspace(0.0, 1.0, len(colours)), colours)


class ModelView(QWidget):
    head_chosen = Signal(int, int)  # layer, head (0-based)
    side_changed = Signal(int)  # the thumbnails' side (device pixels) after a resize: make them again

    def __init__(self, parent: QWidget | None = None):
        """Thumbnails at the device pixels each gets, made again after a resize (:attr:`side_changed`:
        whoever makes them, the survey's or the generation's worker, makes them at the new side)."""
        super().__init__(parent)
        self.metric_box = QComboBox()
        self.metric_box.setToolTip("The metric that colours the heat table (definitions: README)")
        self.fit_box = QCheckBox("Fit each head")
        self.fit_box.setToolTip("Colour each thumbnail from 0 to its own largest weight (else 0 to 1)")
        self.fit_box.setChecked(True)
        self.hover_label = QLabel(" ")
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Colour the table by"))
        bar.addWidget(self.metric_box)
        bar.addWidget(self.fit_box)
        bar.addStretch(1)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        # layer and head labels thinned to what fits (30 layers × 9 heads overprinted)
        self.mosaic_plot = self.canvas.addPlot(row=0, col=0, enableMenu=False, axisItems=_cell_axes())
        self.table_plot = self.canvas.addPlot(row=1, col=0, enableMenu=False, axisItems=_cell_axes())
        self.canvas.ci.layout.setRowStretchFactor(0, 3)
        self.canvas.ci.layout.setRowStretchFactor(1, 2)
        for plot, title in ((self.mosaic_plot, "Attention of every layer × head"), (self.table_plot, "")):
            plot.invertY(True)
            plot.hideButtons()
            plot.setMouseEnabled(False, False)
            plot.getViewBox().setAspectLocked(plot is self.mosaic_plot)  # the table fills its width
            plot.getViewBox().setDefaultPadding(0.0)
            plot.showAxis("top")
            plot.hideAxis("bottom")
            plot.setTitle(title, size="9pt")
            for side in ("left", "top"):  # near-black labels: pyqtgraph's grey read poorly
                plot.getAxis(side).setTextPen(TEXT_RGB)
                # ticks outside the plot: pyqtgraph's default draws them 5 px into it, grey over
                # the first pixels of each thumbnail (a third of a small one)
                plot.getAxis(side).setStyle(tickLength=TICK_PX)
        self.mosaic = pg.ImageItem(axisOrder="row-major")
        self.mosaic_plot.addItem(self.mosaic)
        self.table = pg.ImageItem(axisOrder="row-major")
        self.table_plot.addItem(self.table)
        self.colour_bar = scale_bar(self.table_plot, "", cmap=metric_colour_map(), image=self.table)
        # the thumbnails' scale: 0 to 1, or 0 to each head's own largest weight ("Fit each head")
        self.mosaic_bar = scale_bar(self.mosaic_plot, "")
        self.fit_box.toggled.connect(self._label_bars)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.hover_label)

        self._lut = _mosaic_lut()
        self.layers = self.heads = 0
        self.side = THUMB  # the largest thumbnail side that fits the view, in device pixels
        # The least thumbnail side the view's height keeps (0: none, the view fits its room whatever the
        # side): the encoder-decoder window's rows keep READABLE_SIDE and scroll, its thumbnails were ~30 px.
        self.least_side = 0
        self.matrix_shape = (0, 0)  # (n_q, n_k) of the heads shown
        self.tile = (THUMB, THUMB)  # thumbnail rows, cols (pixels)
        self.painted_layers = 0  # how many layers arrived since set_shape (for tests and the bench)
        self.metrics: dict[str, np.ndarray] = {}
        self._pixels = np.zeros((0, 0), np.uint8)
        self.metric_box.currentTextChanged.connect(lambda _name: self._paint_table())
        self.canvas.scene().sigMouseMoved.connect(self._hover)
        self.canvas.scene().sigMouseClicked.connect(self._clicked)
        self._resized = debounced(self._check_side, "resize pause", self)
        self.mosaic_plot.getViewBox().sigResized.connect(lambda *_a: self._resized())
        for bar in (self.mosaic_bar, self.colour_bar):
            bar.geometryChanged.connect(self._label_bars)

    def view_pixels(self) -> tuple[int, int] | None:
        """(rows, cols) of device pixels the mosaic's area covers, None before it is laid out."""
        box = self.mosaic_plot.getViewBox()
        ratio = self.canvas.devicePixelRatioF()
        rows, cols = int(box.height() * ratio), int(box.width() * ratio)
        return (rows, cols) if rows > 1 and cols > 1 else None

    def wanted_side(self, layers: int | None = None, heads: int | None = None) -> int:
        """The thumbnail side that fits the view now (for ``layers × heads``, default the shown ones)."""
        return tile_side(self.view_pixels(), layers or self.layers, heads or self.heads)

    def settled(self) -> bool:
        """True when the thumbnails are at the side the view's pixels ask for; else asks for that
        side at once (:attr:`side_changed`, without the resize pause) and returns False. Screenshots
        call it once what was asked is painted: a first layout can move the axes and the pixels."""
        if not self.layers or self.wanted_side() == self.side:
            return True
        self._resized.cancel()
        self.side_changed.emit(self.wanted_side())
        return False

    def _check_side(self) -> None:
        if self.layers and self.wanted_side() != self.side:
            self.side_changed.emit(self.wanted_side())

    def hold_room(self, layers: int) -> None:
        """The mosaic's least height: ``layers`` thumbnails of :attr:`least_side` device pixels and
        their gaps, and the heat table's TABLE_ROW_PX rows; the canvas asks its parents for that room.
        Nothing when least_side is 0 (the survey and Generate windows: the view fits what it is given)."""
        if not self.least_side:
            return
        rows = layers * (self.least_side + GAP) - GAP if layers else 0
        self.mosaic_plot.getViewBox().setMinimumHeight(rows / self.canvas.devicePixelRatioF())
        self.table_plot.getViewBox().setMinimumHeight(layers * TABLE_ROW_PX)
        hold_least_height(self.canvas)

    def thumbnails(self, weights: np.ndarray, fit_each: bool | None = None) -> np.ndarray:
        """``weights (h, n_q, n_k)`` -> this view's thumbnails, at its device-pixel side."""
        fit = self.fit_box.isChecked() if fit_each is None else fit_each
        return thumbnail_indices(weights, fit, side=self.side)

    # --- content ---------------------------------------------------------------------------
    def set_shape(self, layers: int, heads: int, n_q: int, n_k: int, side: int | None = None) -> None:
        """Start a new survey: an empty mosaic of ``layers × heads`` thumbnails, each as large as
        the view's device pixels allow (:meth:`wanted_side`), or ``side`` (the side of thumbnails
        made elsewhere, about to be painted). Nothing is reduced here: the tile's size comes
        from the sizes alone (thumbnail_shape)."""
        self.layers, self.heads, self.painted_layers = layers, heads, 0
        self.matrix_shape = (n_q, n_k)
        self.hold_room(layers)
        self.side = self.wanted_side() if side is None else side
        self.tile = thumbnail_shape(n_q, n_k, self.side)
        t_q, t_k = self.tile
        self._pixels = np.full((layers * (t_q + GAP) - GAP, heads * (t_k + GAP) - GAP), EMPTY_INDEX, np.uint8)
        self.mosaic.setImage(self._pixels, autoLevels=False, levels=(0, 255), lut=self._lut)
        self.mosaic.setRect(QRectF(0, 0, self._pixels.shape[1], self._pixels.shape[0]))
        left, top = self.mosaic_plot.getAxis("left"), self.mosaic_plot.getAxis("top")
        left.set_cells([(l * (t_q + GAP) + t_q / 2, f"L{l}") for l in range(layers)])  # noqa: E741
        top.set_cells([(h * (t_k + GAP) + t_k / 2, f"H{h}") for h in range(heads)])
        self.table_plot.getAxis("left").set_cells(layer_cells(layers))
        self.table_plot.getAxis("top").set_cells(head_cells(heads))
        self.mosaic_plot.setRange(xRange=(0, self._pixels.shape[1]), yRange=(0, self._pixels.shape[0]), padding=0)
        self.metrics = {}
        self.table.clear()

    def set_layer(self, layer: int, weights: np.ndarray | None = None, indices: np.ndarray | None = None) -> None:
        """Paint one layer: ``weights (h, n_q, n_k)`` floats, or ready ``indices (h, t_q, t_k)``
        (made for another size than the view's now: made again from ``weights`` when given)."""
        t_q, t_k = self.tile
        if indices is None or (indices.shape[1:] != (t_q, t_k) and weights is not None):
            indices = self.thumbnails(weights)
        if indices.shape != (self.heads, t_q, t_k):
            raise ValueError(f"layer {layer}: thumbnails {indices.shape}, expected {(self.heads, t_q, t_k)}")
        y = layer * (t_q + GAP)
        for h in range(self.heads):
            x = h * (t_k + GAP)
            self._pixels[y : y + t_q, x : x + t_k] = indices[h]
        self.mosaic.updateImage(self._pixels)
        self.painted_layers += 1

    def set_layers(self, indices: np.ndarray) -> None:
        """Paint every layer at once from ready ``indices (layers, h, t_q, t_k)``: one image update."""
        t_q, t_k = self.tile
        if indices.shape != (self.layers, self.heads, t_q, t_k):
            raise ValueError(f"thumbnails {indices.shape}, expected {(self.layers, self.heads, t_q, t_k)}")
        mosaic = np.full((self.layers, t_q + GAP, self.heads, t_k + GAP), EMPTY_INDEX, np.uint8)
        mosaic[:, :t_q, :, :t_k] = indices.transpose(0, 2, 1, 3)  # (layer, row, head, col)
        rows, cols = self._pixels.shape  # the last layer and head have no gap after them
        self._pixels[...] = mosaic.reshape(self.layers * (t_q + GAP), -1)[:rows, :cols]
        self.mosaic.updateImage(self._pixels)
        self.painted_layers = self.layers

    def set_metrics(self, metrics: dict[str, np.ndarray]) -> None:
        """Metrics ``{name: (layers, heads)}``: fill the combo box and colour the heat table."""
        self.metrics = metrics
        current = self.metric_box.currentText()
        if [self.metric_box.itemText(i) for i in range(self.metric_box.count())] != list(metrics):
            self.metric_box.blockSignals(True)
            self.metric_box.clear()
            self.metric_box.addItems(list(metrics))
            if current in metrics:
                self.metric_box.setCurrentText(current)
            self.metric_box.blockSignals(False)
        self._paint_table()

    def choose_metric(self, name: str) -> None:
        self.metric_box.setCurrentText(name)

    def _paint_table(self) -> None:
        name = self.metric_box.currentText()
        if name not in self.metrics:
            return
        values = np.asarray(self.metrics[name], dtype=np.float64)
        lo, hi, widened = levels_with_span(values, name)
        self.table.setImage(np.where(np.isfinite(values), values, lo), autoLevels=False)
        self.table.setRect(QRectF(0, 0, self.heads, self.layers))
        self.colour_bar.setLevels((lo, hi))
        self._label_bars()
        finite = values[np.isfinite(values)]
        span = MIN_SPAN.get(name, DEFAULT_MIN_SPAN)
        within = metric_text(float(np.ptp(finite))) if finite.size else ""
        note = f" (all within {within}: scale {span} wide)" if widened and finite.size else ""
        self.table_plot.setTitle(f"Heads coloured by {name}{note}", size="9pt")
        self.table_plot.setRange(xRange=(0, self.heads), yRange=(0, self.layers), padding=0)

    def _label_bars(self) -> None:
        """Each colour bar's label, as long as its bar allows (the encoder-decoder window's rows are short)."""
        if self.fit_box.isChecked():
            fit_label(self.mosaic_bar, "weight ÷ each head's largest", "÷ head's largest", "÷ max")
        else:
            fit_label(self.mosaic_bar, "weight")
        name = self.metric_box.currentText()
        fit_label(self.colour_bar, UNITS.get(name, name), name, UNITS.get(name, name).partition("(")[2].rstrip(")"))

    # --- mouse -----------------------------------------------------------------------------
    def head_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """(layer, head) under a scene position, on a thumbnail or a heat-table cell."""
        for plot in (self.mosaic_plot, self.table_plot):
            view = plot.getViewBox()
            if not view.sceneBoundingRect().contains(scene_pos):
                continue
            p = view.mapSceneToView(scene_pos)
            x, y = p.x(), p.y()
            if plot is self.table_plot:
                layer, head = int(np.floor(y)), int(np.floor(x))
            else:
                t_q, t_k = self.tile
                layer, head = int(np.floor(y / (t_q + GAP))), int(np.floor(x / (t_k + GAP)))
                if y - layer * (t_q + GAP) >= t_q or x - head * (t_k + GAP) >= t_k:
                    return None  # in a gap
            if 0 <= layer < self.layers and 0 <= head < self.heads:
                return layer, head
        return None

    def scene_pos_of(self, layer: int, head: int) -> QPointF:
        """The scene position of a thumbnail's centre (for tests)."""
        t_q, t_k = self.tile
        point = QPointF(head * (t_k + GAP) + t_k / 2, layer * (t_q + GAP) + t_q / 2)
        return self.mosaic_plot.getViewBox().mapViewToScene(point)

    def describe(self, layer: int, head: int) -> str:
        text = f"layer {layer} · head {head}"
        name = self.metric_box.currentText()
        if name in self.metrics:
            text += f" · {name} = {self.metrics[name][layer, head]:.4f}"
        return text

    def _hover(self, scene_pos: QPointF) -> None:
        found = self.head_at(scene_pos)
        self.hover_label.setText(self.describe(*found) + " (click to open it)" if found else " ")

    def _clicked(self, event) -> None:
        found = self.head_at(event.scenePos())
        if found is not None and event.button() == Qt.MouseButton.LeftButton:
            self.head_chosen.emit(*found)
