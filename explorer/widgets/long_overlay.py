"""A long input's structure drawn over its weights (issue 34), on one heatmap:

- the edges of the model's sliding window (or two-sided band): dashed lines where its band begins
  (and ends), labelled with the window, over the real weights;
- a learned sink's column (gpt-oss): a dotted line at the last column, labelled with the head's logit;
- beside the map, each row's weight on the first key, the **sink share**, as a line (rows aligned with
  the map's at any zoom: its view's rows are linked to the map's), with a learned sink's share too.
  The shares are exact from the rows' statistics (models.engine.long_structure); rows the overview has
  not reached yet are left out. More rows than the side plot has pixels: each pixel row shows the
  smallest and the largest share of its rows (a band), as the map keeps each block's peak.

All of it is built the first time a long input is shown, and hidden for any other picture.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

SIDE_PX = 92  # the sink-share plot's width beside the map
EDGE_RGB = (255, 85, 40)  # red-orange: in neither colour map, readable on viridis and on the masked grey
KEY0_RGB = (20, 90, 170)  # the first key's share: dark blue on white
SINK_RGB = (230, 80, 20)  # a learned sink's share
MAX_POINTS = 2048  # pixel rows of the side plot at most: more rows are shown as min..max bands
LOG_FLOOR = -6  # the side plot's axis: log₁₀ of the share, 10⁻⁶ to 1 (1/131,072 is 10⁻⁵·¹)


def _envelope(share: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows + 0.5, low, high)`` of the rows known (not NaN), at most MAX_POINTS of them: each point the
    smallest and the largest share of its bucket of rows (the same where each bucket is one row), as
    log₁₀ from LOG_FLOOR (a share of 0, a key the window hides: NaN, no line)."""
    with np.errstate(divide="ignore"):
        share = np.where(share > 0, np.log10(np.maximum(share, 10.0**LOG_FLOOR)), np.where(share == 0, np.inf, share))
    n = share.shape[0]
    step = max(1, -(-n // MAX_POINTS))
    padded = np.full(-(-n // step) * step, np.nan, np.float32)
    padded[:n] = share
    buckets = padded.reshape(-1, step)
    known = ~np.isnan(buckets).all(axis=1)
    with np.errstate(all="ignore"):
        low, high = np.nanmin(buckets[known], axis=1), np.nanmax(buckets[known], axis=1)
    y = (np.flatnonzero(known) * step + step / 2).astype(np.float64)
    low[np.isinf(low)], high[np.isinf(high)] = np.nan, np.nan
    return y, low, high


class LongOverlay:
    """The structure's items on one HeatmapPlot (``plot.plot`` its MatrixPlotItem)."""

    def __init__(self, plot) -> None:
        item = plot.plot
        edge = pg.mkPen(EDGE_RGB, width=2, style=Qt.PenStyle.DashLine)
        self.edges = pg.PlotCurveItem(pen=edge, connect="pairs")
        self.edge_label = pg.TextItem(color=EDGE_RGB, anchor=(-0.04, 1.05))
        dots = pg.mkPen(EDGE_RGB, width=2, style=Qt.PenStyle.DotLine)
        label = {"position": 0.04, "color": EDGE_RGB, "anchors": [(1, 0), (1, 0)]}  # left of the line, at the top
        self.sink = pg.InfiniteLine(angle=90, pen=dots, label="", labelOpts=label)
        for thing in (self.edges, self.edge_label, self.sink):
            thing.setZValue(8)
            item.addItem(thing)
        # beside the map: a view whose rows are the map's (linked), its own log₁₀ axis below it
        self.view = pg.ViewBox(enableMenu=False, invertY=True, defaultPadding=0.0)
        self.view.setMouseEnabled(x=False, y=False)
        self.view.setBackgroundColor((250, 250, 250))
        self.axis = pg.AxisItem("bottom")
        self.axis.linkToView(self.view)
        self.axis.setTicks([[(-4.0, "10⁻⁴"), (0.0, "1")], [(float(t), "") for t in (-6, -5, -3, -2, -1)]])
        self.title = pg.LabelItem("", size="8pt")
        self.low_high = pg.FillBetweenItem(pg.PlotDataItem(), pg.PlotDataItem(), brush=(*KEY0_RGB, 90))
        self.key0 = pg.PlotDataItem(pen=pg.mkPen(KEY0_RGB, width=1.5), connect="finite")
        self.sink_share = pg.PlotDataItem(pen=pg.mkPen(SINK_RGB, width=1.5, style=Qt.PenStyle.DashLine),
                                          connect="finite")  # fmt: skip
        for thing in (self.low_high, self.key0, self.sink_share):
            self.view.addItem(thing)
        self.view.setXRange(float(LOG_FLOOR), 0.0, padding=0.06)
        self.view.setYLink(item.getViewBox())
        self.view.disableAutoRange()
        self.layout = item.layout
        for thing, row in ((self.title, 0), (self.view, 1), (self.axis, 2)):
            self.layout.addItem(thing, row, 2)
        self.shown: bool | None = None

    def show(self, structure, head: int) -> None:
        self._visible(True)
        segments = structure.edges()
        x = [p for seg in segments for p in (seg[0][0], seg[1][0])]
        y = [p for seg in segments for p in (seg[0][1], seg[1][1])]
        self.edges.setData(np.array(x, float), np.array(y, float))
        self.edges.setVisible(bool(segments))
        self.edge_label.setVisible(bool(segments))
        if segments:  # in the bottom-left corner, below the edge: the keys the band hides from those rows
            self.edge_label.setPos(0.0, float(structure.n_rows))
            self.edge_label.setText(f"window {structure.window:,}" if structure.window is not None
                                    else f"band ±{structure.band:,}")  # fmt: skip
        has_sink = structure.sinks is not None
        self.sink.setVisible(has_sink)
        if has_sink:
            self.sink.setValue(structure.n_keys)
            self.sink.label.setFormat(f"learned sink s = {float(structure.sinks[head]):.2f}")
        y, low, high = _envelope(structure.first_key[head])
        self.low_high.curves[0].setData(np.nan_to_num(low, nan=LOG_FLOOR), y)  # rows hidden: no width
        self.low_high.curves[1].setData(np.nan_to_num(high, nan=LOG_FLOOR), y)
        self.key0.setData(high, y)
        if has_sink:
            sy, _, sink_high = _envelope(structure.sink_share[head])
            self.sink_share.setData(sink_high, sy)
        else:
            self.sink_share.setData([], [])
        self.title.setText("weight on<br>key 0" + (" / <span style='color:#e65014'>sink</span>" if has_sink else ""),
                           size="8pt")  # fmt: skip

    def hide(self) -> None:
        self._visible(False)
        for thing in (self.edges, self.edge_label, self.sink):
            thing.setVisible(False)

    def _visible(self, on: bool) -> None:
        if on == self.shown:
            return
        self.shown = on
        for thing in (self.title, self.view, self.axis):
            thing.setVisible(on)
        self.layout.setColumnFixedWidth(2, SIDE_PX if on else 0)


def side_plot(stage) -> int:
    """The pixels beside each map of ``stage`` taken by its sink-share plot (0: none), for the grid's plan."""
    return SIDE_PX if stage.streamed else 0


def show_structure(plot, structure, head: int) -> None:
    """Draw ``structure`` (a :class:`~models.engine.long_structure.LongStructure`, or None: nothing) on ``plot``."""
    overlay = getattr(plot, "long_overlay", None)
    if structure is None:
        if overlay is not None:
            overlay.hide()
        return
    if overlay is None:
        overlay = plot.long_overlay = LongOverlay(plot)
    overlay.show(structure, head)
