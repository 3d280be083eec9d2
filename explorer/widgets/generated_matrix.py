"""One head's attention over the generated sequence, rows up to the current step, with the
prompt / generated boundary marked (dashed lines) and the current row outlined; below it, the
head's share of attention on the first token at every position (an attention-sink line).

A step only swaps the uint8 image (computed off the GUI thread), moves the outline and the marker,
and sets the caption: labels, range and boundary are set once per generation, the title and the
sink lines only when the head changes."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from explorer.widgets.colormaps import lookup_table
from explorer.widgets.labels import rich_safe
from explorer.widgets.scale_bar import scale_bar
from explorer.widgets.token_axis import TokenAxis
from models.engine.colour_index import MASKED_INDEX as MASKED

BOUNDARY_PEN = dict(color=(255, 255, 255), width=2, style=Qt.PenStyle.DashLine)


class GeneratedMatrix(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.left, self.bottom = TokenAxis("left"), TokenAxis("bottom")
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.plot = self.canvas.addPlot(row=0, col=0, enableMenu=False, axisItems={"left": self.left,
                                                                                  "bottom": self.bottom})  # fmt: skip
        self.plot.invertY(True)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(False, False)
        self.plot.getViewBox().setAspectLocked(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.scale = scale_bar(self.plot, "weight")  # 0 to the step's top colour (the caption's number)
        self.v_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(**BOUNDARY_PEN))
        self.h_line = pg.InfiniteLine(angle=0, pen=pg.mkPen(**BOUNDARY_PEN))
        self.plot.addItem(self.v_line)
        self.plot.addItem(self.h_line)
        self.row_box = pg.QtWidgets.QGraphicsRectItem()
        self.row_box.setPen(pg.mkPen((230, 60, 20), width=2))
        self.plot.addItem(self.row_box)
        self.sink_plot = self.canvas.addPlot(row=1, col=0, enableMenu=False)
        self.sink_plot.setMouseEnabled(False, False)
        self.sink_plot.hideButtons()
        self.sink_plot.setYRange(0, 1, padding=0.05)
        self.sink_plot.getAxis("left").setLabel("on token 0")
        self.sink_curve = self.sink_plot.plot(pen=pg.mkPen((230, 120, 20), width=2))
        self.mean_curve = self.sink_plot.plot(pen=pg.mkPen((120, 120, 120), width=1, style=Qt.PenStyle.DashLine))
        self.sink_marker = pg.InfiniteLine(angle=90, pen=pg.mkPen((230, 60, 20)))
        self.sink_plot.addItem(self.sink_marker)
        self.canvas.ci.layout.setRowStretchFactor(0, 4)
        self.canvas.ci.layout.setRowStretchFactor(1, 1)
        self.caption = QLabel(" ")
        self.caption.setTextFormat(Qt.TextFormat.PlainText)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.caption)
        # Two lines always (what this step shows; what the marks mean), as wide as the column: a
        # step's new text never lays the window out again.
        self.caption.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.caption.setFixedHeight(2 * self.caption.fontMetrics().lineSpacing() + 2)
        self.matrix: np.ndarray | None = None
        self.n, self.causal, self.title = 0, True, ""

    def set_sequence(self, tokens, prompt_length: int, causal: bool = True) -> None:
        """A new generation: the token labels, the prompt / generated boundary, the view's range.
        Called once per generation, so a step never re-lays out an axis or the range."""
        n = len(tokens)
        self.n, self.causal = n, causal
        self.image.setImage(np.full((n, n), MASKED, np.uint8), autoLevels=False, levels=(0, 255),
                            lut=lookup_table(True))  # fmt: skip
        self.image.setRect(QRectF(0, 0, n, n))
        self.left.set_labels(tuple(tokens))
        self.bottom.set_labels(tuple(tokens))
        self.v_line.setValue(prompt_length)
        self.h_line.setValue(prompt_length)
        self.plot.setRange(xRange=(0, n), yRange=(0, n), padding=0)

    def show_step(self, indices: np.ndarray, top: float, matrix: np.ndarray, position: int, title: str,
                  sink_out: bool = False) -> None:  # fmt: skip
        """Paint ready colour ``indices (n, n)`` (explorer.engine.generation_view.head_indices; ``top``:
        the weight of the top colour) of the head ``matrix (n, n)``, row ``position`` outlined."""
        self.matrix = matrix
        self.image.setImage(indices, autoLevels=False)
        if self.scale.levels() != (0.0, top):
            self.scale.setLevels((0.0, top))
        self.row_box.setRect(QRectF(0, position, (position if self.causal else self.n - 1) + 1, 1))
        if title != self.title:  # a step of the same head keeps its title: no text layout
            self.title = title
            self.plot.setTitle(rich_safe(title), size="9pt")
        scale = "0 to the largest weight off token 0" if sink_out else "0 to the largest weight"
        marks = "dashed: prompt | generated; outlined: this step's row" if self.causal else "outlined: the mask's row"
        self.caption.setText(f"Position {position}; colours: {scale} ({top:.3f})\n{marks}")

    def set_sink(self, head_share: np.ndarray, mean_share: np.ndarray, position: int) -> None:
        """Weight on token 0 at every position: this head (orange), the mean of all heads (dashed);
        the lines are set again only when they changed (another head), the marker at every step."""
        if not (_same(head_share, self.sink_curve.yData) and _same(mean_share, self.mean_curve.yData)):
            x = np.arange(len(head_share))
            self.sink_curve.setData(x, head_share)
            self.mean_curve.setData(x, mean_share)
            self.sink_plot.setXRange(0, max(len(head_share) - 1, 1), padding=0.02)
        self.sink_marker.setValue(position)


def _same(a: np.ndarray, b: np.ndarray | None) -> bool:
    return b is not None and a.shape == b.shape and np.array_equal(a, b)
