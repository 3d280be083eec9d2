"""The logit lens as a layers × positions map: each cell coloured by the probability the layer
gives to the token that comes next, and labelled with the layer's own top token when the cells are
large enough for it at the size they are drawn (the title says which: SmolLM2's 30 layers make 7 px
cells, which only hover names). The current step's column is outlined; hover asks
``describe(layer, position)`` (the top-5 at that layer) and shows the answer below."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.widgets.cell_axis import CellAxis, layer_cells
from explorer.widgets.colormaps import lookup_table
from explorer.widgets.labels import display_label, rich_safe
from explorer.widgets.scale_bar import scale_bar
from explorer.widgets.token_axis import TokenAxis, shorten

MAX_TEXT_CELLS = 320  # beyond this many cells the map is coloured only (hover still names them)
COLOURS = 127


class LensMap(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.describe: Callable[[int, int], str] = lambda layer, pos: ""
        self.bottom = TokenAxis("bottom")
        self.plot = pg.PlotWidget(background="w", enableMenu=False, axisItems={"bottom": self.bottom,
                                                                                 "left": CellAxis("left")})
        self.plot.setMouseEnabled(False, False)
        self.plot.hideButtons()
        self.plot.invertY(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.scale = scale_bar(self.plot.getPlotItem(), "probability")  # the indices' 0..1 (COLOURS steps)
        self.column = pg.QtWidgets.QGraphicsRectItem()
        self.column.setPen(pg.mkPen((230, 60, 20), width=2))
        self.plot.addItem(self.column)
        self.boundary = pg.InfiniteLine(angle=90, pen=pg.mkPen((255, 255, 255), width=2, style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.boundary)
        self.texts: list[pg.TextItem] = []
        self.hover_label = QLabel(" ")
        self.hover_label.setWordWrap(True)
        self.hover_label.setTextFormat(Qt.TextFormat.PlainText)
        self.shape = (0, 0)
        self.waiting = False  # set_waiting: the cells are being computed
        self.target = "the next token"
        self.plot.getViewBox().sigResized.connect(lambda *_a: self._fit_texts())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.hover_label)
        self.plot.scene().sigMouseMoved.connect(self._hover)

    def set_waiting(self, layers: int, tokens, prompt_length: int, target: str = "the next token") -> None:
        """The map's shape and axes, its cells empty, while they are computed (:meth:`set_lens` fills them)."""
        n = len(tokens)
        self.shape, self.target, self.waiting = (layers, n), target, True
        self.image.clear()
        self._axes(tokens, prompt_length)
        self._fit_texts()

    def _axes(self, tokens, prompt_length: int) -> None:
        L, n = self.shape
        self.bottom.set_labels(tuple(tokens))
        self.plot.getAxis("left").set_cells(layer_cells(L))
        self.boundary.setValue(prompt_length)
        for item in self.texts:
            self.plot.removeItem(item)
        self.texts = []
        self.plot.setRange(xRange=(0, n), yRange=(0, L), padding=0)

    def set_lens(self, prob: np.ndarray, labels: list[list[str]], tokens, prompt_length: int,
                 target: str = "the next token") -> None:  # fmt: skip
        """``prob (L, n)`` in 0..1 (of ``target``), ``labels[l][p]`` the top token, ``tokens`` the sequence."""
        L, n = prob.shape
        self.shape = (L, n)
        indices = np.rint(np.clip(np.nan_to_num(prob), 0, 1) * (COLOURS - 1)).astype(np.uint8)
        self.image.setImage(indices, autoLevels=False, levels=(0, 255), lut=lookup_table(True))
        self.image.setRect(QRectF(0, 0, n, L))
        self.waiting = False
        self._axes(tokens, prompt_length)
        if L * n <= MAX_TEXT_CELLS:
            for layer in range(L):
                for p in range(n):
                    dark = prob[layer, p] > 0.55  # viridis turns light: dark text there
                    item = pg.TextItem(shorten(display_label(labels[layer][p]), 6), anchor=(0.5, 0.5),
                                       color=QColor(20, 20, 20) if dark else QColor(245, 245, 245))  # fmt: skip
                    item.setPos(p + 0.5, layer + 0.5)
                    self.plot.addItem(item)
                    self.texts.append(item)
        self.target = target
        self._fit_texts()

    @property
    def texts_shown(self) -> bool:
        """True when the cells carry their top token's text (large enough for it as drawn)."""
        return bool(self.texts) and self.texts[0].isVisible()

    def _fit_texts(self) -> None:
        """Each cell's text only when every text fits its cell at the size the map is now; the title
        says what the cells show."""
        L, n = self.shape
        box = self.plot.getViewBox()
        fits = False
        if self.texts and L and n:
            metrics = QFontMetricsF(self.texts[0].textItem.font())
            wide = max(metrics.horizontalAdvance(t.textItem.toPlainText()) for t in self.texts)
            fits = box.width() / n >= wide + 2 and box.height() / L >= metrics.height()
        for item in self.texts:
            item.setVisible(fits)
        text = "text = that layer's top token" if fits else "hover a cell for that layer's top 5 tokens"
        title = f"Logit lens: colour = probability of {rich_safe(self.target)} after each layer; {text}"
        if self.waiting:
            title = f"Logit lens: computing the probability of {rich_safe(self.target)} after each layer…"
        if self.plot.getPlotItem().titleLabel.text != title:
            self.plot.setTitle(title, size="9pt")

    def set_position(self, position: int) -> None:
        L = self.shape[0]
        self.column.setRect(QRectF(position, 0, 1, L))

    def cell_at(self, scene_pos) -> tuple[int, int] | None:
        if not self.plot.sceneBoundingRect().contains(scene_pos):
            return None
        pt = self.plot.getViewBox().mapSceneToView(scene_pos)
        layer, p = int(np.floor(pt.y())), int(np.floor(pt.x()))
        L, n = self.shape
        return (layer, p) if 0 <= layer < L and 0 <= p < n else None

    def _hover(self, scene_pos) -> None:
        cell = self.cell_at(scene_pos)
        if cell is not None:
            self.hover_label.setText(self.describe(*cell))
