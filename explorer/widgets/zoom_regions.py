"""Every heatmap reduced to the device pixels it is drawn on: the visible region, from the exact values.

A view asks for each stage at the device pixels of its plots (:meth:`ZoomRegions.plots_on_screen`, handed with
each submit and each stage asked for, as napari's slicer asks at the canvas's size): the worker reduces
the stage once, to those pixels, and it is painted once. Only when a plot's pixels differ from the ones
its image was made for (a resize that changes the cells per pixel) or the plot is zoomed or panned (after
a pause) is the region in view asked of the worker again at the plot's own device pixels: each pixel
then holds its block's peak (enlarged to 3 × 3 pixels when cells are smaller than a pixel), and a
region small enough gets one pixel or more per cell, sharp down to single cells.

While a newer request is on its way (:meth:`ZoomRegions.supersede`, on every submit) the picture
on screen is outgoing: its regions are neither asked for nor painted (each was a repaint of the
whole grid, on the GUI thread, while the worker computed the picture that replaces it); the next
result asks again, and so does a failed request, whose picture stays (:meth:`forget`).
"""

from __future__ import annotations

import math

from explorer.images.plot_pixels import PlotsOnScreen
from explorer.widgets.colormaps import lookup_table
from explorer.widgets.frames import debounced, later
from models.engine.pixels import block_step


def device_pixels(plot, ratio: float = 1.0) -> tuple[int, int]:
    """(rows, cols) of device pixels the plot's matrix area covers."""
    box = plot.plot.getViewBox()
    return max(1, math.floor(box.height() * ratio)), max(1, math.floor(box.width() * ratio))


def step_for(region: tuple[int, int, int, int], pixels: tuple[int, int]) -> tuple[int, int]:
    """The cells per pixel (rows, cols) that ``region`` is reduced with onto ``pixels``. A picture is a
    function of its region and this step alone: one made for other pixels with the same step is the
    same picture (a resize of a few pixels asks for nothing again)."""
    r0, r1, c0, c1 = region
    return block_step(r1 - r0, pixels[0]), block_step(c1 - c0, pixels[1])


def visible_region(plot) -> tuple[int, int, int, int]:
    """Rows r0:r1, cols c0:c1 of the cells in view (clamped to the matrix)."""
    (x0, x1), (y0, y1) = plot.plot.getViewBox().viewRange()
    return (max(0, math.floor(y0)), min(plot.rows, math.ceil(y1)),
            max(0, math.floor(x0)), min(plot.cols, math.ceil(x1)))  # fmt: skip


class ZoomRegions:
    def __init__(self, view) -> None:
        self.view = view  # the MatrixView: its plots, shown stage and regions_wanted signal
        self._zoomed: set[int] = set()  # ids of plots whose range or size changed since the last ask
        self._asked: dict[int, tuple] = {}  # head -> what was asked, until it comes (or the "zoom patience" passed)
        self._soon = debounced(self.ask, "zoom pause", view)  # once a zoom, pan or resize pauses
        self.superseded = False  # a newer request is on its way: the picture on screen is outgoing
        self._stage_asked: tuple | None = None  # the last whole stage asked for (ask_stage)

    def record(self, plots=None) -> None:
        """The state's zoom pane (explorer/panes.py) follows the plots: each zoomed plot's cells in view.
        ``plots``: only these changed (each plot's range and size signal: a grid laid out again sends
        two per plot, so reading every plot each time was quadratic); None: read them all."""
        shown = self.view.plots
        heads = {plot.head for plot in shown if plot.rows}
        if plots is None:
            regions, plots = {}, shown
        else:
            regions = {head: r for head, r in self.view.state.zoom.regions.items() if head in heads}
        for plot in plots:
            if not plot.rows or plot.head not in heads:
                continue
            region = visible_region(plot)
            if region != (0, plot.rows, 0, plot.cols):
                regions[plot.head] = region
            else:
                regions.pop(plot.head, None)
        self.view.state.zoom.set_regions(regions)

    def changed(self, *plots) -> None:
        """A plot's range or size changed: ask for its region after a pause, unless it shows its
        whole matrix at one pixel or more per cell already (nothing to ask: no wait)."""
        self.record(plots)
        plots = [p for p in plots if not self._whole_and_exact(p)]
        if plots:
            self._zoomed.update(id(p) for p in plots)
            self._soon()

    def _whole_and_exact(self, plot) -> bool:
        view = self.view
        display, stage = view.state.display, view.state.stepper.stage
        if display is None or stage is None or plot.rows == 0 or plot.region is not None:
            return False
        image = display.images.get(stage.name)
        if image is None or visible_region(plot) != (0, plot.rows, 0, plot.cols):
            return False
        # made with the step this plot's pixels need (at its pixels, say): painted once, nothing to ask
        return image.step == step_for((0, plot.rows, 0, plot.cols), device_pixels(plot, self.ratio()))

    def plots_on_screen(self, cells: tuple[int, int] | None = None) -> PlotsOnScreen | None:
        """The plots laid out now (their device pixels, count, head choice, and the ``cells`` they are
        laid out for: by default those they show), None before the first: a view asks for each stage at
        its plots' pixels (submit, prepare), reduced once and painted once (explorer.images.plot_pixels)."""
        plots = self.view.plots if cells is not None else [p for p in self.view.plots if p.rows]
        if not plots:
            return None
        cells = cells or (plots[0].rows, plots[0].cols)
        return PlotsOnScreen(device_pixels(plots[0], self.ratio()), len(self.view.plots), cells, self.view.state.head)

    def ask_stage(self, display, stage, cells: tuple[int, int] | None = None) -> None:
        """Ask the worker for ``stage``'s whole picture at the plots' device pixels (laid out for its
        ``cells``; by default the ones on screen), once: not again while it is on its way. A paint held
        for it is released after the "hold for image" delay if it has not come: the canvas is never frozen."""
        view = self.view
        asked = (display.generation, stage.name, view.state.fit_colours, self.plots_on_screen(cells))
        if asked != self._stage_asked:
            self._stage_asked = asked
            view.image_missing.emit(*asked)
            later("hold for image", view, lambda: self._stage_late(asked))

    def _stage_late(self, asked: tuple) -> None:
        display = self.view.state.display
        waiting = display is not None and display.generation == asked[0] and asked[1] not in display.images
        if waiting and self._stage_asked == asked and self.view.paint_held:
            self.view.paint_soon.request()

    def now(self, *plots) -> None:
        """Ask for ``plots`` at once (a new image just laid out), not after the pause."""
        self.record()
        self._zoomed.update(id(p) for p in plots)
        self.ask()

    @property
    def pending(self) -> bool:
        """True while an ask waits for its pause or its answer (a screenshot waits for it)."""
        return self._soon.pending or bool(self._asked)

    def _give_up(self, head: int, key: tuple) -> None:
        """``key``'s answer never came ("zoom patience"): it stops counting as pending."""
        if self._asked.get(head) == key:
            del self._asked[head]

    def ratio(self) -> float:
        return self.view.canvas.devicePixelRatioF()

    def ask(self) -> None:
        self._soon.cancel()
        view = self.view
        display, stage = view.state.display, view.state.stepper.stage
        if self.superseded or display is None or stage is None or display.generation != view.state.stepper.generation:
            self._zoomed.clear()
            return
        image = display.images.get(stage.name)
        zoomed, self._zoomed = self._zoomed, set()
        if image is None:
            return
        lut = lookup_table(image.sequential)
        asks = []
        for plot in view.plots:
            if id(plot) not in zoomed or plot.rows == 0:
                continue
            region = visible_region(plot)
            r0, r1, c0, c1 = region
            if r1 <= r0 or c1 <= c0:
                continue
            pixels = device_pixels(plot, self.ratio())
            step = step_for(region, pixels)  # (1, 1): the cells fit, each one pixel or more
            # The whole stage made with this step (at this plot's pixels, or exact cells that fit): no second reduction.
            if region == (0, plot.rows, 0, plot.cols) and image.step == step:
                if plot.region is not None:  # zoomed out again: the whole matrix's exact image
                    plot.set_region(image.indices[plot.head if stage.per_head else 0], lut, region)
                plot.painted_key = None
                continue
            key = (display.generation, stage.name, region, step, tuple(image.levels))  # the picture, not the pixels
            if plot.painted_key == key or self._asked.get(plot.head) == key:
                continue  # on screen already, or on its way
            self._asked[plot.head] = key
            later("zoom patience", view, lambda head=plot.head, key=key: self._give_up(head, key))
            asks.append((plot.head, region, tuple(image.levels), pixels))
        if asks:  # asked together, answered together: one repaint for all the plots
            view.regions_wanted.emit(display.generation, stage.name, asks)

    def forget(self) -> None:
        """A new stage or result (or a request failed, its picture stays): what was asked for the old
        one will not be painted, and the regions are asked again."""
        self._asked.clear()
        self._stage_asked = None
        self.superseded = False

    def supersede(self) -> None:
        """A newer request was submitted: stop refining the picture it will replace."""
        self.superseded = True
        self._asked.clear()
        self._zoomed.clear()
        self._soon.cancel()

    def arrived_together(self, generation: int, images: list) -> None:
        """The worker's reductions of regions asked together, ``[(head, image)]``: painted in one turn."""
        for head, image in images:
            self.arrived(generation, head, image)

    def arrived(self, generation: int, head: int, image) -> None:
        """The worker's reduction of a region: paint it on the plot showing that head."""
        view = self.view
        stage = view.state.stepper.stage
        asked = self._asked.pop(head, None)
        if self.superseded or stage is None or generation != view.state.stepper.generation or image.name != stage.name:
            return
        for plot in view.plots:
            if plot.head == head and image.region is not None:
                plot.set_region(image.indices[0], lookup_table(image.sequential), image.region)
                plot.painted_key = asked if asked is not None and asked[2] == image.region else None
                plot.painted_step = image.step
                view.numbers.schedule()
        view.update_range_line()
