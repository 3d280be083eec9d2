"""Zoom and pan on a reduced matrix: the visible region is redrawn from the exact values.

A matrix larger than its pixels is shown as each block's peak. When the user zooms or pans (and
pauses for a moment), the region in view is asked of the worker again at the view's resolution,
down to one pixel per cell; zooming out again brings back the whole matrix's image.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QTimer

from .colormaps import lookup_table

PAUSE_MS = 120  # zooming and panning ask the worker once they pause


class ZoomRegions:
    def __init__(self, view) -> None:
        self.view = view  # the MatrixView: its plots, shown stage and region_wanted signal
        self._zoomed: set[int] = set()  # ids of plots whose range changed since the last ask
        self._timer = QTimer(view)
        self._timer.setSingleShot(True)
        self._timer.setInterval(PAUSE_MS)
        self._timer.timeout.connect(self.ask)

    def changed(self, *plots) -> None:
        self._zoomed.update(id(p) for p in plots)
        self._timer.start()

    def ask(self) -> None:
        view = self.view
        display, stage = view.state.display, view.shown_stage
        if display is None or stage is None or display.generation != view.shown_generation:
            return
        image = display.images.get(stage.name)
        zoomed, self._zoomed = self._zoomed, set()
        if image is None or image.step == (1, 1):
            return  # every cell already has its own pixel
        lut = lookup_table(image.sequential)
        for plot in view.plots:
            if id(plot) not in zoomed:
                continue
            (x0, x1), (y0, y1) = plot.plot.getViewBox().viewRange()
            region = (max(0, math.floor(y0)), min(plot.rows, math.ceil(y1)),
                      max(0, math.floor(x0)), min(plot.cols, math.ceil(x1)))  # fmt: skip
            if region[1] <= region[0] or region[3] <= region[2]:
                continue
            if region == (0, plot.rows, 0, plot.cols):
                if plot.region is not None:  # zoomed out again: the whole matrix's image
                    head = plot.head if stage.per_head else 0
                    plot.set_region(image.indices[head], lut, region)
                continue
            view.region_wanted.emit(display.generation, stage.name, plot.head, region, tuple(image.levels))

    def arrived(self, generation: int, head: int, image) -> None:
        """The worker's reduction of a zoomed region: paint it on the plot showing that head."""
        view = self.view
        stage = view.shown_stage
        if stage is None or generation != view.shown_generation or image.name != stage.name:
            return
        for plot in view.plots:
            if plot.head == head and image.region is not None:
                plot.set_region(image.indices[0], lookup_table(image.sequential), image.region)
                view.numbers.schedule()
