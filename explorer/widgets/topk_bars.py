"""The next-token choices of one step as horizontal bars, most likely at the top; the token that
was chosen is drawn in orange (and added below the top-k when it lay outside them).

A step keeps the one bar item and sets its widths and colours; the token labels, the ranges and
the title are set only when they change, and the label axis only ever widens (to the widest label
seen), so stepping through a generation never lays the plot out again."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF
from PySide6.QtWidgets import QVBoxLayout, QWidget

from explorer.widgets.labels import display_label, rich_safe
from explorer.widgets.token_axis import shorten

BAR_RGB = (70, 110, 170)
CHOSEN_RGB = (230, 120, 20)
LABEL_CHARS = 14  # a token is shortened to this many characters
TYPICAL_LABEL = "n" * 10 + "  0.000"  # the label axis is at least this wide from the start
MIN_TOP = 0.05  # the probability axis shows at least 0..MIN_TOP


def nice_top(value: float) -> float:
    """The probability axis's end: the smallest of 1, 2, 2.5, 5 × 10^k at or above ``value`` (at
    most 1), so steps whose largest probability differs a little keep the same axis."""
    value = min(max(value, MIN_TOP), 1.0)
    scale = 10.0 ** math.floor(math.log10(value))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * scale >= value * (1 - 1e-9):
            return min(m * scale, 1.0)
    return 1.0


class TopKBars(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.plot = pg.PlotWidget(background="w", enableMenu=False)
        self.plot.setMouseEnabled(False, False)
        self.plot.hideButtons()
        self.plot.invertY(True)
        self.plot.setXRange(0, 1, padding=0.02)
        self.plot.getAxis("bottom").setLabel("probability")
        left = self.plot.getAxis("left")
        self.label_width = int(QFontMetricsF(left.style["tickFont"] or QFont()).horizontalAdvance(TYPICAL_LABEL)) + 12
        left.setWidth(self.label_width)
        self.bars: pg.BarGraphItem | None = None
        self.labels: list[str] = []
        self.chosen_row: int | None = None
        self.title = ""
        self.x_top = 0.0
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)

    def set_bars(self, tokens, probs, chosen: int | None, chosen_token: str = "", chosen_prob: float | None = None,
                 title: str = "") -> None:  # fmt: skip
        """``tokens``/``probs``: the top-k, most likely first; ``chosen``: the id's row among them
        (None: not among them, then ``chosen_token``/``chosen_prob`` add a row below)."""
        tokens, probs = [display_label(t) for t in tokens], [float(p) for p in probs]  # a space as ␣
        self.chosen_row = chosen
        if chosen is None and chosen_prob is not None:
            tokens.append(f"… {display_label(chosen_token)}")
            probs.append(float(chosen_prob))
            self.chosen_row = len(tokens) - 1
        brushes = [pg.mkBrush(*(CHOSEN_RGB if i == self.chosen_row else BAR_RGB)) for i in range(len(tokens))]
        rows = len(tokens)
        if self.bars is None or len(self.bars.opts["y"]) != rows:  # a new number of bars: a new item
            if self.bars is not None:
                self.plot.removeItem(self.bars)
            self.bars = pg.BarGraphItem(x0=0, y=list(range(rows)), height=0.75, width=probs, brushes=brushes,
                                        pen=None)  # fmt: skip
            self.plot.addItem(self.bars)
            self.plot.setYRange(-0.6, max(rows, 1) - 0.4, padding=0)
        else:
            self.bars.setOpts(width=probs, brushes=brushes)
        labels = [f"{shorten(t, LABEL_CHARS)}  {p:.3f}" for t, p in zip(tokens, probs)]
        if labels != self.labels:
            self.labels = labels
            left = self.plot.getAxis("left")
            metrics = QFontMetricsF(left.style["tickFont"] or QFont())
            wanted = int(max((metrics.horizontalAdvance(s) for s in labels), default=0)) + 12
            if wanted > self.label_width:  # widen only: a narrower label keeps the layout as it is
                self.label_width = wanted
                left.setWidth(wanted)
            left.setTicks([list(enumerate(labels))])
        x_top = nice_top(max(probs, default=0.0) * 1.05)
        if x_top != self.x_top:
            self.x_top = x_top
            self.plot.setXRange(0, x_top, padding=0)
        if title != self.title:
            self.title = title
            self.plot.setTitle(rich_safe(title), size="9pt")
