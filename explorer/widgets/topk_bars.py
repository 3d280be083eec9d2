"""The next-token choices of one step as horizontal bars, most likely at the top; the token that
was chosen is drawn in orange (and added below the top-k when it lay outside them)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from .token_axis import shorten

BAR_RGB = (70, 110, 170)
CHOSEN_RGB = (230, 120, 20)


class TopKBars(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.plot = pg.PlotWidget(background="w", enableMenu=False)
        self.plot.setMouseEnabled(False, False)
        self.plot.hideButtons()
        self.plot.invertY(True)
        self.plot.setXRange(0, 1, padding=0.02)
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.plot.getAxis("bottom").setLabel("probability")
        self.bars: pg.BarGraphItem | None = None
        self.labels: list[str] = []
        self.chosen_row: int | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)

    def set_bars(self, tokens, probs, chosen: int | None, chosen_token: str = "", chosen_prob: float | None = None,
                 title: str = "") -> None:  # fmt: skip
        """``tokens``/``probs``: the top-k, most likely first; ``chosen``: the id's row among them
        (None: not among them, then ``chosen_token``/``chosen_prob`` add a row below)."""
        tokens, probs = list(tokens), list(probs)
        self.chosen_row = chosen
        if chosen is None and chosen_prob is not None:
            tokens.append(f"… {chosen_token}")
            probs.append(chosen_prob)
            self.chosen_row = len(tokens) - 1
        brushes = [pg.mkBrush(*(CHOSEN_RGB if i == self.chosen_row else BAR_RGB)) for i in range(len(tokens))]
        if self.bars is not None:
            self.plot.removeItem(self.bars)
        self.bars = pg.BarGraphItem(x0=0, y=list(range(len(tokens))), height=0.75, width=probs, brushes=brushes,
                                    pen=None)  # fmt: skip
        self.plot.addItem(self.bars)
        self.labels = [f"{shorten(t, 14)}  {p:.3f}" for t, p in zip(tokens, probs)]
        self.plot.getAxis("left").setTicks([[(i, label) for i, label in enumerate(self.labels)]])
        self.plot.setYRange(-0.6, max(len(tokens), 1) - 0.4, padding=0)
        self.plot.setXRange(0, max(max(probs, default=0.0), 0.05) * 1.05, padding=0)
        self.plot.setTitle(title, size="9pt")
