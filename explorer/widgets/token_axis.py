"""An axis that labels matrix cells with token strings, thinned to what fits.

Ticks sit at cell centres (i + 0.5). Instead of a fixed ``setTicks`` list, the labels are
chosen from the visible range and the axis length on every layout, so resizing or zooming
into a 2048-token matrix shows as many labels as fit and never draws thousands of strings.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from .labels import display_label

MAX_LABEL_CHARS = 12
ROW_PITCH_PX = 15  # vertical space one label needs
LABEL_GAP_PX = 6  # horizontal space between two labels
EDGE_OVERHANG_PX = 14
NICE_STEPS = (1, 2, 5)


def shorten(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def nice_step(minimum: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is at least ``minimum``: labels then sit
    at round positions and do not jump around while the window is resized."""
    scale = 1
    while True:
        for s in NICE_STEPS:
            if s * scale >= minimum:
                return s * scale
        scale *= 10


def spaced_indices(first: int, last: int, start: float, cell_px: float, widths: list[float]) -> list[int]:
    """Cells from ``first`` to ``last`` (the axis starts at value ``start``) whose centred labels
    do not overlap, chosen greedily from the left: short tokens all get a label, a long one
    pushes only its neighbours out."""
    kept, right_edge = [], -np.inf
    for i in range(first, last + 1):
        centre = (i + 0.5 - start) * cell_px
        if centre - widths[i] / 2 >= right_edge + LABEL_GAP_PX:
            kept.append(i)
            right_edge = centre + widths[i] / 2
    return kept


MEASURED_LABELS = 512  # beyond this many tokens, label widths are bounded, not measured one by one
SHARED_PICTURES = 64  # drawn axes kept for axes drawn the same (all heads of a grid share their labels)
_pictures: OrderedDict[tuple, object] = OrderedDict()


def clear_shared_pictures() -> None:
    """Forget every shared axis drawing: each axis draws its own again when it next paints."""
    _pictures.clear()


class TokenAxis(pg.AxisItem):
    def __init__(self, orientation: str, **kwargs):
        super().__init__(orientation, **kwargs)
        # No units, so no SI prefix: otherwise every range change (each layout) re-renders the
        # axis label's HTML, ~30 times per plot while a grid is laid out.
        self.enableAutoSIPrefix(False)
        if not self.vertical:  # let the first and last token's label reach a little past the matrix
            self.setStyle(hideOverlappingLabels=EDGE_OVERHANG_PX)
        self._labels: tuple[str, ...] = ()
        self._shown: tuple[str, ...] = ()
        self._widths: list[float] | None = None  # pixel width of each shortened label, measured lazily

    @property
    def labels(self) -> tuple[str, ...]:
        """The token label of each cell, as given to set_labels (before shortening)."""
        return self._labels

    @property
    def vertical(self) -> bool:
        return self.orientation in ("left", "right")

    def set_labels(self, labels: tuple[str, ...]) -> None:
        if labels == self._labels:
            return
        self._labels = tuple(labels)
        # What is drawn: characters no installed font covers become code points (U+4E2D), never boxes.
        font = self.style["tickFont"] or QFont()
        self._shown = tuple(display_label(s, font) for s in self._labels)
        self._widths = None
        if self.vertical:  # as wide as the labels from the start, rather than grown while painting
            self.setWidth(self.label_room())
        self.picture = None  # pyqtgraph caches the drawn axis; labels changed, so redraw
        self.update()

    def _label_widths(self) -> list[float]:
        if self._widths is None:
            metrics = QFontMetricsF(self.style["tickFont"] or QFont())
            if len(self._shown) <= MEASURED_LABELS:
                self._widths = [metrics.horizontalAdvance(shorten(s)) for s in self._shown]
            else:  # thousands of tokens: measuring each (~3 µs) would stall a paint; a bound per length
                per_char = metrics.horizontalAdvance("W")
                self._widths = [per_char * len(shorten(s)) for s in self._shown]
        return self._widths

    def label_room(self) -> int:
        """Pixels the longest label needs beside the axis, so a grid can reserve it exactly."""
        return int(max(self._label_widths(), default=0)) + self.style["tickTextOffset"][0] + 10

    def paint(self, p, opt, widget):
        """pyqtgraph draws each axis into a QPicture once per change of labels, range or size,
        ~2 ms of Python each: the grid's heads share their token labels, so an axis drawn exactly
        like one already drawn (same labels, range, size and style) replays that picture. On a
        12-head model this took a paint from ~50 to ~25 ms."""
        if self.picture is None:
            key = self._picture_key()
            if key in _pictures:
                _pictures.move_to_end(key)
                self.picture = _pictures[key]
            else:
                super().paint(p, opt, widget)  # draws self.picture and plays it
                _pictures[key] = self.picture
                while len(_pictures) > SHARED_PICTURES:
                    _pictures.popitem(last=False)
                return
        self.picture.play(p)

    def _picture_key(self) -> tuple:
        """Everything the drawing depends on (pyqtgraph's AxisItem.generateDrawSpecs)."""
        style = tuple((k, v.key() if isinstance(v, QFont) else repr(v)) for k, v in sorted(self.style.items()))
        pens = tuple((pen.color().rgba(), pen.widthF(), pen.style()) for pen in (self.pen(), self.textPen(),
                                                                                self.tickPen()))  # fmt: skip
        size = self.size()
        return (self.orientation, self._shown, tuple(self.range), size.width(), size.height(), style, pens,
                self.label.isVisible() and self.labelText, self.grid, self._tickLevels is None)  # fmt: skip

    def tickValues(self, minVal: float, maxVal: float, size: float):  # noqa: N802 - pyqtgraph API
        n = len(self._labels)
        minVal, maxVal = sorted((minVal, maxVal))  # noqa: N806 - an inverted axis passes them swapped
        if n == 0 or size <= 0 or maxVal <= minVal:
            return []
        first = max(0, math.floor(minVal))
        last = min(n - 1, math.ceil(maxVal) - 1)
        if last < first:
            return []
        cell_px = size / (maxVal - minVal)
        if self.vertical:
            step = nice_step(math.ceil(ROW_PITCH_PX / cell_px))
            kept = range(math.ceil(first / step) * step, last + 1, step)
        else:
            kept = spaced_indices(first, last, minVal, cell_px, self._label_widths())
        return [(1.0, [i + 0.5 for i in kept])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        n = len(self._labels)
        return [shorten(self._shown[int(v)]) if 0 <= int(v) < n else "" for v in values]
