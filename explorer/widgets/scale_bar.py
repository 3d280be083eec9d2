"""A labelled colour scale beside a plot: every colour map on screen says what its colours mean.

``scale_bar(plot, label)`` puts a colour bar right of ``plot`` (pyqtgraph's ``insert_in`` place),
with the label along it. Linked to an image (``image=``), the bar sets the image's levels; unlinked,
it shows ``values`` for an image painted through a lookup table of its own (uint8 indices).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics

from explorer.widgets.colormaps import TEXT_RGB, colour_map
from explorer.widgets.value_axis import with_value_axis

# A map of nearly equal numbers looks nearly uniform: its colours span at least this much of the
# metric's own units (entropy in nats, distance in tokens, the rest are weights in 0..1).
MIN_SPAN = {"entropy": 0.05, "distance": 0.5}
DEFAULT_MIN_SPAN = 0.05


def scale_bar(plot: pg.PlotItem, label: str, values: tuple[float, float] = (0.0, 1.0),
              cmap: pg.ColorMap | None = None, image: pg.ImageItem | None = None) -> pg.ColorBarItem:  # fmt: skip
    bar = pg.ColorBarItem(values=values, colorMap=cmap or colour_map(True), interactive=False, width=12)
    with_value_axis(bar)  # its numbers thinned to the bar's length: a short bar's never overprint
    bar.axis.setTextPen(TEXT_RGB)
    bar.axis.setPen(TEXT_RGB)
    bar.axis.setLabel(label, color=pg.mkColor(TEXT_RGB))  # beside its numbers (the constructor's label
    # went on the bar's other side, away from them)
    if image is not None:
        bar.setImageItem(image, insert_in=plot)
    else:
        plot.layout.addItem(bar, 2, 5)
        plot.layout.setColumnFixedWidth(4, 5)
    return bar


def levels_with_span(values: np.ndarray, name: str) -> tuple[float, float, bool]:
    """(low, high, widened): the finite ``values``' range, widened about its middle to the metric's
    minimum span (:data:`MIN_SPAN`) when narrower; ``widened`` says so."""
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    span = MIN_SPAN.get(name, DEFAULT_MIN_SPAN)
    if hi - lo >= span:
        return lo, hi, False
    low = max((lo + hi) / 2 - span / 2, 0.0 if lo >= 0 else -np.inf)  # a weight's scale never below 0
    return low, low + span, True


def fit_label(bar: pg.ColorBarItem, *texts: str) -> str:
    """The first of ``texts`` (longest first) that fits along ``bar``, set as its label ("" when none
    fits): a label longer than a short bar ran into the next plot's (the model view's small rows)."""
    axis = bar.axis
    room = bar.geometry().height() - 4
    metrics = QFontMetrics(axis.label.font())
    chosen = next((t for t in texts if metrics.horizontalAdvance(t) <= room), "")
    if axis.labelText != chosen or axis.label.isVisible() != bool(chosen):
        axis.setLabel(chosen, color=pg.mkColor(TEXT_RGB)) if chosen else axis.showLabel(False)
        # pyqtgraph centres a label along its axis only on a resize: a longer text stayed where the
        # shorter one's middle was, and ran past the bar's end ("weight ÷ each head's large", cut).
        axis.resizeEvent()
    return chosen


def blank_axes(widget, blank: bool) -> None:
    """Every axis of the plots under ``widget`` without (``blank``) or with its numbers: an empty plot
    before a run read −0.5 … 0.5 on both axes, numbers of nothing."""
    views = widget.findChildren(pg.GraphicsView)
    for view in views:
        for item in view.scene().items():
            if isinstance(item, pg.AxisItem) and item.style["showValues"] == blank:
                item.setStyle(showValues=not blank)
