"""A numeric axis whose labels never overprint: pyqtgraph always labels its top tick level, at least
two ticks whatever the axis's length, so a colour bar 30 px tall (an encoder-decoder's rollout) or a
focus chart squeezed by the inspector printed "0.2" over "0.4" over "0.6".

:class:`ValueAxis` keeps pyqtgraph's tick levels whose spacing leaves each label its extent (a stacked
label: the font's line height; side by side: the widest label and a gap), and when none does, the
smallest round spacing (1, 2, 5 × 10^k) that does: fewer labels, never one over another.

    plot = pg.PlotWidget(axisItems={"left": ValueAxis("left")})
    with_value_axis(colour_bar)         # a pg.ColorBarItem's own axis replaced by one
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from explorer.widgets.colormaps import TEXT_RGB

LABEL_GAP_PX = 6  # between two labels side by side
STACK_GAP_PX = 2  # between two stacked labels
ROUND_STEPS = (1.0, 2.0, 5.0)


class ValueAxis(pg.AxisItem):
    """pyqtgraph's AxisItem whose labels are thinned to what its length holds (:meth:`tickSpacing`);
    its tick marks stay pyqtgraph's."""

    def __init__(self, orientation: str, **kwargs):
        super().__init__(orientation, **kwargs)
        self.label_spacing = 0.0  # the least spacing (axis units) of the tick levels that are labelled

    def extent(self, minVal: float, maxVal: float, spacing: float) -> float:  # noqa: N803 (pyqtgraph's names)
        """Pixels one label needs along the axis, measured with the axis font."""
        metrics = QFontMetricsF(self.style["tickFont"] or QFont())
        if self.orientation in ("left", "right"):
            return metrics.height() + STACK_GAP_PX
        texts = super().tickStrings([minVal, maxVal], 1.0, spacing)
        return max(metrics.horizontalAdvance(t) for t in texts) + LABEL_GAP_PX

    def tickSpacing(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803
        """pyqtgraph's levels, labelled only where a level's spacing leaves each label its extent;
        when not even the first does, a sparser level (1, 2, 5 × 10^k) before them carries the labels."""
        levels = super().tickSpacing(minVal, maxVal, size)
        span = abs(maxVal - minVal)
        self.label_spacing = 0.0
        if not levels or span == 0 or size <= 0:
            return levels
        per_unit = size / span
        roomy = [spacing for spacing, _offset in levels if spacing * per_unit >= self.extent(minVal, maxVal, spacing)]
        if roomy:
            self.label_spacing = min(roomy)
            return levels
        spacing = round_spacing(levels[0][0])
        while spacing * per_unit < self.extent(minVal, maxVal, spacing):
            spacing = round_spacing(spacing * 1.0001)
        self.label_spacing = spacing
        return [(spacing, 0), *levels]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        if spacing < self.label_spacing * (1 - 1e-9):
            return [None] * len(values)  # a level too dense to label: its tick marks alone (None: no text)
        return super().tickStrings(values, scale, spacing)


def round_spacing(at_least: float) -> float:
    """The smallest of 1, 2, 5 × 10^k that is at least ``at_least`` (> 0)."""
    scale = 10.0 ** math.floor(math.log10(at_least))
    for step in (*ROUND_STEPS, 10.0):
        if step * scale >= at_least * (1 - 1e-9):
            return step * scale
    return 10.0 * scale


def with_value_axis(bar: pg.ColorBarItem) -> pg.ColorBarItem:
    """``bar`` (vertical) with a :class:`ValueAxis` in place of its own numbers' axis (pyqtgraph's
    ``setAxisItems``), set up as ColorBarItem sets up its own."""
    axis = ValueAxis("right")
    bar.setAxisItems({"right": axis})
    axis.setZValue(0.5)
    axis.setWidth(45)
    axis.setStyle(showValues=True)
    axis.unlinkFromView()
    axis.setRange(*bar.levels())
    axis.setTextPen(TEXT_RGB)
    axis.setPen(TEXT_RGB)
    bar.axis = axis  # the attribute ColorBarItem keeps its numbers' axis in (setLevels ranges it)
    return bar
