"""One head's attention over the generated sequence, rows up to the current step, with the
prompt / generated boundary marked (dashed lines) and the current row outlined; below it, the
head's share of attention on the first token at every position (an attention-sink line)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.sink_scale import first_key_out_of_scale

from .colormaps import lookup_table
from .token_axis import TokenAxis

COLOURS = 127
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
        self.matrix: np.ndarray | None = None

    def set_matrix(self, a: np.ndarray, tokens, prompt_length: int, position: int, title: str,
                   sink_out: bool = False, last_row: int | None = None) -> None:  # fmt: skip
        """``a (n, n)`` one head over the whole sequence, row ``position`` outlined; rows after
        ``last_row`` (default: ``position``) are left empty and so is the causal upper triangle."""
        n = a.shape[0]
        last = position if last_row is None else last_row
        shown = a[: last + 1]
        scaled = first_key_out_of_scale(shown) if sink_out else shown
        top = float(np.nanmax(scaled)) if scaled.size else 1.0
        top = top if top > 0 else 1.0
        indices = np.full((n, n), 255, np.uint8)  # masked grey: not generated yet at this step
        indices[: last + 1] = np.rint(np.clip(scaled / top, 0, 1) * (COLOURS - 1)).astype(np.uint8)
        if last_row is None:  # a decoder: the future is hidden
            upper = np.triu(np.ones((last + 1, n), bool), 1)
            indices[: last + 1][upper] = 255
        self.matrix = a
        self.image.setImage(indices, autoLevels=False, levels=(0, 255), lut=lookup_table(True))
        self.image.setRect(QRectF(0, 0, n, n))
        self.left.set_labels(tuple(tokens))
        self.bottom.set_labels(tuple(tokens))
        self.v_line.setValue(prompt_length)
        self.h_line.setValue(prompt_length)
        self.row_box.setRect(QRectF(0, position, (position if last_row is None else n - 1) + 1, 1))
        self.plot.setRange(xRange=(0, n), yRange=(0, n), padding=0)
        self.plot.setTitle(title, size="9pt")
        scale = "0 to the largest weight off token 0" if sink_out else "0 to the largest weight"
        marks = "outlined: the mask's row"
        if last_row is None:
            marks = "dashed: prompt | generated; outlined: this step's row"
        self.caption.setText(f"Colours: {scale} ({top:.3f}); {marks}")

    def set_sink(self, head_share: np.ndarray, mean_share: np.ndarray, position: int) -> None:
        """Weight on token 0 at every position: this head (orange), the mean of all heads (dashed)."""
        x = np.arange(len(head_share))
        self.sink_curve.setData(x, head_share)
        self.mean_curve.setData(x, mean_share)
        self.sink_marker.setValue(position)
        self.sink_plot.setXRange(0, max(len(head_share) - 1, 1), padding=0.02)
