"""Attention rollout: ``R_l`` as a token × token heatmap (layer slider), and for one chosen token
its row of ``R_l`` — how much each input token contributes — after every layer (layers × tokens),
with the slider's layer as bars."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from explorer.widgets.cell_axis import CellAxis, layer_cells
from explorer.widgets.colormaps import colour_map
from explorer.widgets.labels import display_label, rich_safe
from explorer.widgets.scale_bar import fit_label, scale_bar
from explorer.widgets.splitter_room import hold_least_height
from explorer.widgets.token_axis import TokenAxis, shorten

LEAST_PLOT_PX = 72  # the layers × tokens map's and the bars' least height


class RolloutView(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, 0)
        self.layer_label = QLabel("after layer 0")
        self.token_box = QComboBox()
        self.token_box.setToolTip("The token whose rollout row the lower plots show")
        self.message = QLabel("")
        # What the plots are, once, in a line that wraps: as plot titles these sentences made the plots
        # wider than the tab (a title is never narrower than its text) and cut off the right-hand ones.
        self.legend = QLabel("Left: the rollout R after the slider's layer, row = token, column = input token "
                             "it draws on. Right: the chosen token's row after every layer, and as bars "
                             "after the slider's layer.")  # fmt: skip
        self.legend.setWordWrap(True)
        self.message.setWordWrap(True)
        self.controls = QWidget()  # the slider and the token box: hidden when there is no rollout
        bar = QHBoxLayout(self.controls)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(QLabel("Rollout"))
        bar.addWidget(self.slider, 1)
        bar.addWidget(self.layer_label)
        bar.addWidget(QLabel("  token"))
        bar.addWidget(self.token_box)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.axes = {side: TokenAxis(side) for side in ("left", "bottom")}
        self.map_plot = self.canvas.addPlot(row=0, col=0, rowspan=2, axisItems=dict(self.axes), enableMenu=False)
        self.rows_axes = {"left": CellAxis("left"), "bottom": TokenAxis("bottom")}
        self.rows_plot = self.canvas.addPlot(row=0, col=1, axisItems=dict(self.rows_axes), enableMenu=False)
        self.bars_axis = TokenAxis("bottom")
        self.bars_plot = self.canvas.addPlot(row=1, col=1, axisItems={"bottom": self.bars_axis}, enableMenu=False)
        for plot in (self.map_plot, self.rows_plot):
            plot.invertY(True)
            plot.hideButtons()
            plot.getViewBox().setDefaultPadding(0.0)
        self.bars_plot.hideButtons()
        # The right-hand plots keep a readable height under their token labels: in the encoder-decoder
        # window's short rows the layers × tokens map was ~10 px tall and its colour bar's numbers overprinted.
        for plot in (self.rows_plot, self.bars_plot):
            plot.getViewBox().setMinimumHeight(LEAST_PLOT_PX)
        self.canvas.ci.layout.setColumnStretchFactor(0, 3)
        self.canvas.ci.layout.setColumnStretchFactor(1, 2)
        cmap = colour_map(True)
        self.map_image = pg.ImageItem(axisOrder="row-major")
        self.map_image.setColorMap(cmap)
        self.map_plot.addItem(self.map_image)
        self.rows_image = pg.ImageItem(axisOrder="row-major")
        self.rows_image.setColorMap(cmap)
        self.rows_plot.addItem(self.rows_image)
        self.map_bar = scale_bar(self.map_plot, "rollout R (0 to its largest)", image=self.map_image)
        self.rows_bar = scale_bar(self.rows_plot, "share (0 to the row's largest)", image=self.rows_image)
        for plot in (self.map_plot, self.rows_plot):  # a short bar (an encoder-decoder's rows) keeps a label
            plot.getViewBox().sigResized.connect(self._label_bars)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8, brush="#3b6ea5")
        self.bars_plot.addItem(self.bars)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.controls)
        layout.addWidget(self.message)
        layout.addWidget(self.legend)
        layout.addWidget(self.canvas, 1)
        self.rollout: np.ndarray | None = None  # (L, n, n) as shown (special tokens maybe left out)
        self.tokens: tuple[str, ...] = ()
        self.slider.valueChanged.connect(lambda _v: self._paint())
        self.token_box.currentIndexChanged.connect(lambda _i: self._paint())

    def set_rollout(self, rollout: np.ndarray | None, tokens: tuple[str, ...], why_none: str = "") -> None:
        """``rollout (L, n, n)`` with its token labels; None (with a reason) when there is none."""
        self.rollout, self.tokens = rollout, tuple(tokens)
        self.message.setText(why_none if rollout is None else "")
        self.message.setVisible(rollout is None)
        self.controls.setVisible(rollout is not None)
        self.legend.setVisible(rollout is not None)
        self.canvas.setVisible(rollout is not None)
        if rollout is None:
            return
        layers, n, _ = rollout.shape
        keep_layer, keep_token = self.slider.value(), self.token_box.currentIndex()
        self.slider.blockSignals(True)
        first = self.slider.maximum() == 0  # nothing shown before: start at the last layer
        self.slider.setRange(0, layers - 1)
        self.slider.setValue(layers - 1 if first else min(keep_layer, layers - 1))
        self.slider.blockSignals(False)
        self.token_box.blockSignals(True)
        self.token_box.clear()
        self.token_box.addItems([f"{i}: {display_label(t, self.font())}" for i, t in enumerate(self.tokens)])
        self.token_box.setCurrentIndex(min(max(keep_token, 0), n - 1))
        self.token_box.blockSignals(False)
        self.axes["left"].set_labels(self.tokens)
        self.axes["bottom"].set_labels(self.tokens)
        self.rows_axes["bottom"].set_labels(self.tokens)
        self.rows_axes["left"].set_cells(layer_cells(layers))
        self.bars_axis.set_labels(self.tokens)
        self.map_plot.setRange(xRange=(0, n), yRange=(0, n), padding=0)
        self.rows_plot.setRange(xRange=(0, n), yRange=(0, layers), padding=0)
        self._paint()

    def choose(self, layer: int, token: int) -> None:
        self.slider.setValue(layer)
        self.token_box.setCurrentIndex(token)

    def contributions(self) -> np.ndarray:
        """(L, n): row ``token`` of every ``R_l``, what the lower plots show."""
        return self.rollout[:, self.token_box.currentIndex(), :]

    def _label_bars(self, *_) -> None:
        """Each colour bar's label, as long as its bar allows: the encoder-decoder window's short rows
        read "share (0 to the row's lar", cut."""
        fit_label(self.map_bar, "rollout R (0 to its largest)", "rollout R", "R")
        fit_label(self.rows_bar, "share (0 to the row's largest)", "share", "")
        hold_least_height(self.canvas)  # the token labels' height changes with the plots' widths

    def _paint(self) -> None:
        if self.rollout is None or self.token_box.currentIndex() < 0:
            return
        layer = self.slider.value()
        layers, n, _ = self.rollout.shape
        self.layer_label.setText(f"after layer {layer}")
        self.map_image.setImage(self.rollout[layer], autoLevels=False)
        self.map_bar.setLevels((0.0, float(self.rollout[layer].max()) or 1.0))
        self.map_image.setRect(QRectF(0, 0, n, n))
        rows = self.contributions()
        self.rows_image.setImage(rows, autoLevels=False)
        self.rows_bar.setLevels((0.0, float(rows.max()) or 1.0))
        self.rows_image.setRect(QRectF(0, 0, n, layers))
        token = rich_safe(shorten(display_label(self.tokens[self.token_box.currentIndex()]), 10))
        self.map_plot.setTitle(f"R after layer {layer}", size="9pt")
        self.rows_plot.setTitle(f"'{token}' by layer", size="9pt")
        self.bars.setOpts(x=np.arange(n) + 0.5, height=rows[layer], width=0.8)
        self.bars_plot.setTitle(f"'{token}' after layer {layer}", size="9pt")
        self.bars_plot.setXRange(0, n, padding=0)
        hold_least_height(self.canvas)
