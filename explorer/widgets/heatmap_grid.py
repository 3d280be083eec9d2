"""The grid of heatmaps in the matrix view's canvas: which plots, in how many columns, how wide.

Plots are built ahead in idle time and kept (a pool): building one costs a few ms, a dozen at
once was the stall of a model's first load. A new grid is laid out once, straight into the
QGraphicsGridLayout.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt

from explorer.widgets.frames import Ticker
from explorer.widgets.heatmap_plot import HeatmapPlot
from explorer.widgets.token_axis import EDGE_OVERHANG_PX, axis_title

GRID_SPACING = 6
COLOUR_BAR_PX = 75  # until the colour bar has been laid out once
PLOT_OVERHEAD_PX = 56  # a plot's title, token labels underneath and spacing, heightwise
TITLE_ROW_PX = 26  # a plot's title and spacing alone
# Images shorter than this with every plot's key labels: only the bottom plot of each column keeps them
# (matplotlib's label_outer). 12 heads at 960 × 700 were 3 rows of labels around 1 px tall images.
MIN_IMAGE_PX = 48
QWIDGETSIZE_MAX = (1 << 24) - 1  # Qt's "no maximum"
READY, BUILDING, LAID_OUT = "ready", "building", "laid out"  # HeatmapGrid.ensure


def grid_columns(count: int, width: float, height: float, rows: int, cols: int, row_overhead: float = 0.0,
                 column_overhead: float = 0.0) -> int:  # fmt: skip
    """The number of grid columns that gives each matrix cell the most pixels.

    ``row_overhead``: the pixels each grid row spends besides its matrices (title, token labels
    underneath, spacing); with 12 heads that decides between 3 × 4 squashed plots and 4 × 3.
    ``column_overhead``: the same for each grid column (a long input's sink-share plot beside each map)."""
    best, best_cell = 1, -1.0
    for c in range(1, count + 1):
        r = math.ceil(count / c)
        cell = min((width / c - column_overhead) / max(cols, 1), (height - r * row_overhead) / r / max(rows, 1))
        if cell > best_cell:
            best, best_cell = c, cell
    return best


class HeatmapGrid:
    """``plots`` on screen, laid out in ``canvas`` beside ``colour_bar``; ``on_plot_built(plot)``
    wires each new plot; ``on_pool_ready()`` is called once the plots a grid waited for exist."""

    def __init__(self, canvas, colour_bar, on_plot_built, on_pool_ready):
        self.canvas, self.colour_bar = canvas, colour_bar
        self._on_plot_built, self._on_pool_ready = on_plot_built, on_pool_ready
        self.plots: list[HeatmapPlot] = []
        self.pool: list[HeatmapPlot] = []
        self.key: tuple = ()  # (plots, columns) of the grid laid out
        self.outer = False  # key labels under the bottom plot of each column only (a grid short of height)
        self._column_widths: tuple = ()
        self._row_heights: tuple = ()  # (map px, each plot's other px) of an outer grid's fixed rows
        self._target = 0
        self.waiting_for = 0  # plots a shown result needs that are still being built (0: none)
        self.pool_timer = Ticker(canvas, self._grow_pool)  # builds spare plots one per event-loop turn (warm_up)
        # In the scene from the start, so Qt owns it: a pyqtgraph item that Python's garbage
        # collector destroys outside any scene can crash PySide6 (e.g. when no trace ever came).
        self._lay_out([(colour_bar, 0, 1, 1)])

    def plan(self, count: int, rows: int, cols: int, side: int = 0) -> tuple[int, bool]:
        """(columns, outer): the best column count for ``count`` plots of ``rows × cols`` cells (each with
        a plot ``side`` px wide beside it) at the canvas's size, and whether only the bottom plot of each
        column keeps its key labels (matplotlib's label_outer): when, with every plot's, the images would
        be shorter than MIN_IMAGE_PX, or than the labels under them."""
        size = self.canvas.size()
        width, height = size.width() - 90, size.height()
        if side and self.plots:  # beside side plots the row labels' room (first column) decides too
            width -= self.plots[0].left.label_room()  # (only there: the labels change with the stage)
        columns = grid_columns(count, width, height, rows, cols, PLOT_OVERHEAD_PX, side)
        # The labels under a plot as laid out now (upright ones take 60–140 px, not the 30 guessed)
        axis = max([p.bottom.height() for p in self.plots if p.bottom.isVisible()] + [PLOT_OVERHEAD_PX - TITLE_ROW_PX])
        grid_rows = math.ceil(count / columns)
        if grid_rows == 1 or (height - grid_rows * (TITLE_ROW_PX + axis)) / grid_rows >= max(MIN_IMAGE_PX, axis):
            return columns, False
        return grid_columns(count, width, height - axis, rows, cols, TITLE_ROW_PX, side), True

    def shape_changes(self, count: int, rows: int, cols: int, side: int = 0) -> bool:
        """True when the grid laid out now is not the best one for the canvas's size."""
        columns, outer = self.plan(count, rows, cols, side)
        return (count, columns) != self.key or outer != self.outer

    def ensure(self, count: int, rows: int, cols: int, side: int = 0) -> str:
        """READY when ``count`` plots are laid out in the best column count for ``rows × cols``
        cells; LAID_OUT when a new grid was laid out just now (fill it in a later turn); BUILDING
        while the pool is short of plots: they are built one per turn, then on_pool_ready()."""
        if len(self.pool) < count:
            self.waiting_for = count
            self.warm_up(count)
            return BUILDING
        self.waiting_for = 0
        columns, outer = self.plan(count, rows, cols, side)
        if (count, columns) == self.key and outer == self.outer:
            return READY
        self.key, self.outer, self._column_widths, self._row_heights = (count, columns), outer, (), ()
        self.plots = self.pool[:count]
        overhang = EDGE_OVERHANG_PX if columns == 1 else GRID_SPACING // 2
        for i, plot in enumerate(self.plots):
            # Shown first: a hidden axis sizes itself to 0 px (pyqtgraph), and would grow back while
            # painting, which re-lays out the whole grid and paints it a second time.
            plot.plot.show()
            # Row labels once per grid row, on the left: more room for the matrices. A hidden axis
            # shrank to 0 px, and its labels did not change: its width is set again when shown.
            first = i % columns == 0
            plot.plot.showAxis("left", first)
            if first and plot.left.width() != plot.left.label_room():
                plot.left.setWidth(plot.left.label_room())
            # Edge labels may reach into the margin of a single matrix, not into a neighbour's.
            plot.plot.showAxis("bottom", not (outer and i + columns < count))  # none below it: labelled
            if plot.bottom.style["hideOverlappingLabels"] != overhang:
                plot.bottom.setStyle(hideOverlappingLabels=overhang)
            plot.plot.setMaximumHeight(QWIDGETSIZE_MAX)  # (an outer grid's fit_rows sets it again)
        for spare in self.pool[count:]:
            spare.plot.hide()  # kept (hidden) for the next bigger grid: a model switched back to
        cells = [(plot.plot, i // columns, i % columns, 1) for i, plot in enumerate(self.plots)]
        self._lay_out([*cells, (self.colour_bar, 0, columns, math.ceil(count / columns))])
        return LAID_OUT

    def _lay_out(self, cells: list[tuple]) -> None:
        """Put ``(item, row, col, rowspan)`` in the grid and lay it out once.

        Straight into the QGraphicsGridLayout: pyqtgraph's GraphicsLayout.addItem re-lays out
        the whole grid after every item (a dozen plots: ~40 ms), and its clear() takes items out
        of the scene. Items taken out of the layout stay children of the layout's widget, so in
        the scene, where Qt owns them (a pyqtgraph item that Python's garbage collector destroys
        outside any scene can crash PySide6)."""
        layout = self.canvas.ci.layout
        while layout.count():
            layout.removeAt(layout.count() - 1)
        for c in range(layout.columnCount()):  # forget the previous grid's column widths
            layout.setColumnMinimumWidth(c, 0)
            layout.setColumnMaximumWidth(c, QWIDGETSIZE_MAX)
        for r in range(layout.rowCount()):  # and its rows' heights (an outer grid's: fit_rows)
            layout.setRowMinimumHeight(r, 0)
            layout.setRowMaximumHeight(r, QWIDGETSIZE_MAX)
        for item, row, col, rowspan in cells:
            layout.addItem(item, row, col, rowspan, 1)
        # The view's whole width again: the last resize may have been clamped to a narrower grid's maximum.
        self.canvas.ci.setGeometry(self.canvas.range)
        self.settle_layout()  # once, so that geometry (hover, column widths) is right at once

    def settle_layout(self) -> None:
        """Lay the grid out now, inner layouts first, rather than from posted events after the paint.

        A plot whose own layout changed (axis shown or hidden, widths, title) has a layout request
        pending; handled after the grid is laid out, it invalidates the grid again, so that the
        whole grid would be laid out twice and painted twice (the first time with stale geometry).
        Activated here, the pending requests find nothing left to do."""
        for _ in range(3):  # again while an outer grid's rows change (key labels upright or not)
            for plot in self.plots:
                plot.plot.layout.activate()
            self.canvas.ci.layout.activate()
            if not self.fit_rows():
                break

    def fit_rows(self) -> bool:
        """Give every map of an outer grid the same height (issue 44, item 5): the plots that keep the
        key labels get exactly the labels' height more than the others, the rows holding them too (left
        to the layout, the labelled maps of 16,384 tokens were 125 px tall beside 220 px). True when the
        rows were set anew (the grid is then laid out again)."""
        if not self.outer or not self.plots:
            return False
        columns = self.key[1]
        rows = math.ceil(len(self.plots) / columns)
        # What each plot spends besides its map (title, key labels, a long input's side plot's axis), as
        # laid out: the same whatever its height. Before a first layout, the title row's guess.
        spent = [math.ceil(p.plot.geometry().height() - p.plot.getViewBox().height()) for p in self.plots]
        spent = [s if s >= TITLE_ROW_PX else TITLE_ROW_PX for s in spent]
        row_spent = [max(spent[r * columns : (r + 1) * columns]) for r in range(rows)]
        layout = self.canvas.ci.layout
        _left, top, _right, bottom = layout.getContentsMargins()
        usable = self.canvas.viewport().height() - top - bottom - layout.verticalSpacing() * (rows - 1) - 4
        image = math.floor(max(MIN_IMAGE_PX / 2, (usable - sum(row_spent)) / rows))
        if (image, tuple(spent)) == self._row_heights:
            return False
        self._row_heights = (image, tuple(spent))
        for r in range(rows):
            layout.setRowFixedHeight(r, image + row_spent[r])
        for p, s in zip(self.plots, spent):  # a plot in a row with taller ones: at the row's top
            p.plot.setMaximumHeight(image + s)
            layout.setAlignment(p.plot, Qt.AlignmentFlag.AlignTop)
        return True

    def fit_columns(self) -> None:
        """Give every matrix of a grid the same width: the first column also holds the row labels,
        so it gets exactly their width more than the others (and the same height: fit_rows)."""
        self.fit_rows()
        columns = self.key[1] if self.key else 1
        if columns < 2 or not self.plots:
            return
        room = self.plots[0].left.label_room()
        bar = self.colour_bar.geometry().width() or COLOUR_BAR_PX
        left, _top, right, _bottom = self.canvas.ci.layout.getContentsMargins()
        usable = self.canvas.viewport().width() - bar - left - right - GRID_SPACING * columns - 4
        image = round(max(40.0, (usable - room) / columns))
        # A plot narrower than its own minimum (the key labels of a right-hand column, say) would widen its
        # column alone: every column that much wider instead, so that every map has one width (item 5)
        least = [p.plot.minimumWidth() - (room if i % columns == 0 else 0) for i, p in enumerate(self.plots)]
        image = max(image, math.ceil(max(least)))
        layout = self.canvas.ci.layout
        widths = [layout.columnMaximumWidth(c) for c in range(columns)]
        if (room, image) == self._column_widths and widths == [image + room] + [image] * (columns - 1):
            return  # unchanged: setting them again would re-lay out and repaint the whole grid
        self._column_widths = (room, image)
        for plot in self.plots[::columns]:
            plot.left.setWidth(room)
        self.canvas.ci.layout.setColumnFixedWidth(0, image + room)
        for c in range(1, columns):
            self.canvas.ci.layout.setColumnFixedWidth(c, image)

    # --- the pool --------------------------------------------------------------------------
    def warm_up(self, plots: int) -> None:
        """Build spare plots in idle time up to ``plots``: called while a model loads, so that
        its first result (12 heads, say) does not wait for them or build them all at once."""
        self._target = max(self._target, plots)
        if len(self.pool) < self._target:
            # A result waiting for its plots: one per turn. Else a few ms apart, so that one build
            # and not two shares a turn with whatever else comes (a repaint, a result).
            self.pool_timer.start(0 if self.waiting_for else "idle build")

    def build_now(self) -> None:
        """The plots a grid waits for, built at once (tests and exports)."""
        while len(self.pool) < self.waiting_for:
            self._add_spare()

    def _add_spare(self) -> None:
        spare = HeatmapPlot(len(self.pool))
        self._on_plot_built(spare)
        spare.set_title(f"Head {len(self.pool)}")  # its likely titles (all heads), ready in advance:
        spare.left.set_title(axis_title("query"))  # laid out now, in idle time, not in the turn
        spare.bottom.set_title(axis_title("key"))  # of a model's first result (~5 ms for 12 heads)
        spare.plot.hide()  # first: a visible item added to the scene repaints where it lands
        spare.plot.setParentItem(self.canvas.ci)  # in the scene from the start (see _lay_out)
        self.pool.append(spare)

    def _grow_pool(self) -> None:
        if len(self.pool) < self._target:
            self._add_spare()
        if len(self.pool) >= self._target:  # done: no idle tick left running
            self.pool_timer.stop()
        if self.waiting_for and len(self.pool) >= self.waiting_for:
            self._on_pool_ready()
