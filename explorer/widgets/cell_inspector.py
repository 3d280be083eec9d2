"""The cell inspector: one cell's derivation with its real numbers (models/reads/explain.py,
models/reads/derivation.py).

Shows a :class:`models.reads.explain.Derivation` as a title, the formula with the numbers filled in,
the explanation, a bar chart of the summands (or of a softmax row's exponentials), the largest
terms with the rest summed, and the value. It only formats: every number comes from the
derivation, which was computed from the trace's own arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from explorer.widgets.formula_text import keep_terms
from explorer.widgets.labels import display_text, isolate_tokens
from explorer.widgets.token_axis import TokenAxis
from models.reads.derivation import num

if TYPE_CHECKING:
    from models.reads.derivation import Derivation

POSITIVE = (200, 70, 60)  # the diverging map's ends: red for positive terms,
NEGATIVE = (50, 100, 180)  # blue for negative ones
FOCUS = (240, 170, 30)  # the bar that is the explained cell itself
BARS_PX = 200  # the bar chart's height: room for its bars and upright token labels


class CellInspector(QWidget):
    """``show_derivation(d)`` shows one cell's derivation; ``clear()`` empties the panel."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("cellInspector")
        self.derivation: Derivation | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        self.title = self._label(bold=True, size_delta=2)
        self.formula = self._label(mono=True)
        self.steps = self._label()
        self.steps.setStyleSheet("color: #444;")
        self.caption = self._label(size_delta=-1)
        self.bar_axis = TokenAxis("bottom")  # every bar's token when they fit, else spaced with positions
        self.plot = pg.PlotWidget(background="w", enableMenu=False, axisItems={"bottom": self.bar_axis})
        # A fixed height: growing with the panel, the chart took ~450 px of a 1400 px screenshot and
        # pushed the terms and the value below the fold (issue 44); the derivation is read, not the chart.
        self.plot.setFixedHeight(BARS_PX)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(False, False)
        self.plot.showGrid(y=True, alpha=0.25)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.plot.addItem(self.bars)
        self.zero = pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen((90, 90, 90), width=1))
        self.plot.addItem(self.zero)
        self.terms = self._label(mono=True)
        self.value = self._label(bold=True, size_delta=1)
        for w in (self.title, self.formula, self.steps, self.caption, self.plot, self.terms, self.value):
            layout.addWidget(w)
        layout.addStretch(1)
        self.clear()

    def _label(self, bold: bool = False, mono: bool = False, size_delta: int = 0) -> QLabel:
        label = QLabel()
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setTextFormat(Qt.TextFormat.PlainText)  # keep_terms: breaks only between terms and at "="
        # A term wider than the panel is cut at the panel's edge rather than widening the column.
        label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        font = QFont(label.font())
        if mono:
            # DejaVu Sans last: it draws the left-to-right mark (isolate_tokens) at the line's height
            font.setFamilies(["DejaVu Sans Mono", "Menlo", "Consolas", "monospace", "DejaVu Sans"])
            font.setStyleHint(QFont.StyleHint.Monospace)
        font.setBold(bold)
        if size_delta:
            font.setPointSizeF(max(6.0, font.pointSizeF() + size_delta))
        label.setFont(font)
        return label

    # --- public ---------------------------------------------------------------------------------------
    def clear(self) -> None:
        self.derivation = None
        self.title.setText("Click a cell to see where its number comes from.")
        for label in (self.formula, self.steps, self.caption, self.terms, self.value):
            label.setText("")
        self.bars.setOpts(x=[], height=[])
        self.plot.hide()

    def show_derivation(self, d: Derivation) -> None:
        self.derivation = d
        self._set(self.title, d.title)
        self._set(self.formula, d.formula)
        self._set(self.steps, "\n".join(d.steps))
        self._show_bars(d)
        self._set(self.terms, self._terms_text(d))
        total = d.total()
        value = f"value = {num(d.value, 8)}"
        if total is not None and d.sum_of is not None and len(d.sum_of) > 1:
            value = f"sum of {len(d.sum_of)} terms = {num(total, 8)}   ·   {value}"
        self._set(self.value, value)

    @staticmethod
    def _set(label: QLabel, text: str) -> None:
        """``text`` on ``label``: code points for what no font draws, wrapped only between terms, each
        right-to-left token closed by a left-to-right mark (the line reads left to right)."""
        label.setText(keep_terms(isolate_tokens(display_text(text, label.font()))))

    # --- pieces ---------------------------------------------------------------------------------------
    def bar_heights(self) -> list[float]:
        """The heights of the bars on screen (for tests and screenshots)."""
        heights = self.bars.opts.get("height")
        return [] if heights is None else [float(h) for h in heights]

    def _show_bars(self, d: Derivation) -> None:
        terms = d.bars or []
        if not terms:
            self.caption.setText("")
            self.bars.setOpts(x=[], height=[])
            self.plot.hide()
            return
        heights = [t.value for t in terms]
        brushes = [pg.mkBrush(*(POSITIVE if h >= 0 else NEGATIVE), 220) for h in heights]
        if d.focus_bar is not None and 0 <= d.focus_bar < len(brushes):
            brushes[d.focus_bar] = pg.mkBrush(*FOCUS)
        x = np.arange(len(terms)) + 0.5  # bar i centred in cell i, as the token axis labels it
        self.bars.setOpts(x=x, height=heights, width=0.8, brushes=brushes, pen=pg.mkPen(None))
        named = bool(d.bar_ticks) and len(d.bar_ticks) == len(terms)
        self.bar_axis.set_labels(tuple(d.bar_ticks) if named else tuple(str(i) for i in range(len(terms))))
        self.plot.setXRange(0, len(terms), padding=0.01)
        low, high = min(0.0, *heights), max(0.0, *heights)
        pad = 0.08 * (high - low or 1.0)
        self.plot.setYRange(low - pad, high + pad, padding=0)
        self._set(self.caption, f"{d.bars_caption} ({len(terms)} bars" + (", the cell's own in orange)"
                             if d.focus_bar is not None else ")"))  # fmt: skip
        self.plot.show()

    @staticmethod
    def _terms_text(d: Derivation) -> str:
        if not d.bars:
            return ""
        shown, rest, count = d.largest()
        head = f"the {len(shown)} largest of {len(d.bars)}:" if count else "every term:"
        lines = [head] + ["  " + t.describe() for t in shown]
        if count:
            lines.append(f"  … and {count} more, together {num(rest)}")
        return "\n".join(lines)
