"""An axis of named cells (layers ``L0 … L29``, heads ``H0 … H8``) that never overprints: at the size
it is drawn it labels every k-th cell (k = 1, 2, 5, 10, …, as the token axes thin), k the smallest
that leaves each label its extent, measured with the axis font (a stacked label: the line height;
labels side by side: the widest label and a gap).

Replaces ``axis.setTicks([[(centre, text), …]])``, which draws every label whatever the spacing:
30 layers in a 200 px plot, or 9 heads over a 60 px wide mosaic, printed over each other.

    plot = canvas.addPlot(axisItems={"left": CellAxis("left")})
    plot.getAxis("left").set_cells([(l + 0.5, f"L{l}") for l in range(layers)])
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from explorer.widgets.colormaps import TEXT_RGB
from explorer.widgets.token_axis import LABEL_GAP_PX, nice_step

STACK_GAP_PX = 1  # between two stacked labels (their line heights already hold the descent)


def layer_cells(layers: int, offset: float = 0.5) -> list[tuple[float, str]]:
    """``L0 … L{layers-1}`` at cell centres ``i + offset``."""
    return [(i + offset, f"L{i}") for i in range(layers)]


def head_cells(heads: int, offset: float = 0.5) -> list[tuple[float, str]]:
    """``H0 … H{heads-1}`` at cell centres ``i + offset``."""
    return [(i + offset, f"H{i}") for i in range(heads)]


class CellAxis(pg.AxisItem):
    """``set_cells([(centre, text), …])``, evenly spaced; drawn thinned to what fits (:meth:`step`)."""

    def __init__(self, orientation: str, **kwargs):
        super().__init__(orientation, **kwargs)
        self.cells: list[tuple[float, str]] = []
        self.setTextPen(TEXT_RGB)

    def set_cells(self, cells: list[tuple[float, str]]) -> None:
        cells = [(float(c), str(t)) for c, t in cells]
        if cells != self.cells:
            self.cells = cells
            self.picture = None  # pyqtgraph's cached drawing of the axis
            self.update()

    def extent(self) -> float:
        """Pixels one label needs along the axis, measured with the axis font."""
        metrics = QFontMetricsF(self.style["tickFont"] or QFont())
        if self.orientation in ("left", "right"):
            return metrics.height() + STACK_GAP_PX
        return max((metrics.horizontalAdvance(t) for _c, t in self.cells), default=0.0) + LABEL_GAP_PX

    def step(self, pixels_per_unit: float) -> int:
        """Every how many cells a label is drawn at this scale (1 when all fit)."""
        if len(self.cells) < 2:
            return 1
        pitch = abs(self.cells[1][0] - self.cells[0][0]) * pixels_per_unit
        if pitch <= 0:
            return max(1, len(self.cells))
        return nice_step(max(1, math.ceil(self.extent() / pitch - 1e-9)))

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 (pyqtgraph's names)
        if not self.cells:
            return super().tickValues(minVal, maxVal, size)
        span = abs(maxVal - minVal)  # an inverted view's range runs from its largest value
        k = self.step(size / span if span > 0 else 0.0)
        return [(k, [c for i, (c, _t) in enumerate(self.cells) if i % k == 0])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        if not self.cells:
            return super().tickStrings(values, scale, spacing)
        names = dict(self.cells)
        return [names.get(float(v), "") for v in values]
