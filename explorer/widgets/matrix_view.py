"""The heatmaps of the shown stage: all heads in a grid or one head, a colour bar, and a
read-out of the exact value under the mouse.

Given the state (explorer.state.ExplorerState, duck-typed: widgets do not import it), it
repaints on trace/stage/head changes. It paints uint8 images converted on the worker; the float
arrays are only read for the one cell under the mouse.
"""

from __future__ import annotations

import math
import time
from html import escape

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget
from superqt.utils import signals_blocked

from explorer.heads import array_head, head_name, head_title, is_kv_stage, query_heads_of
from explorer.stage_image import SEQUENTIAL_STAGES
from models.trace import Stage

from .cell_numbers import CellNumbers
from .cell_selection import CellSelection
from .colormaps import MASKED_HEX, NAN_HEX, colour_map, lookup_table
from .heatmap_plot import HeatmapPlot
from .token_axis import EDGE_OVERHANG_PX
from .zoom_regions import ZoomRegions

ALL_HEADS = -1
GRID_SPACING = 6
COLOUR_BAR_PX = 75  # until the colour bar has been laid out once
TURN_MS = 1  # a step of a result's work left to a later event-loop turn
IDLE_BUILD_MS = 5  # spare heatmaps built in idle time: at most one per this many ms
PLOT_OVERHEAD_PX = 56  # a plot's title, token labels underneath and spacing, heightwise
QWIDGETSIZE_MAX = (1 << 24) - 1  # Qt's "no maximum"
MINUS_INFINITY = "−∞ (masked)"
READOUT_HINT = "Hover: exact value of a cell · click a row: focus on that query"
PREPARING = "Preparing"  # the readout while a stage's image or its heatmaps are on their way
COLOUR_SCALES = ("0 to 1", "fit to data", "log")  # state.fit_colours: False, True, "log"
SCALE_VALUES = (False, True, "log")


class _Canvas(pg.GraphicsLayoutWidget):
    """Reports each finished paint, so the app and the benchmark know when a result is on screen."""

    painted = Signal()

    def __init__(self):
        super().__init__()
        self.last_paint_ms = 0.0

    def paintEvent(self, event):  # noqa: N802 - Qt API
        t0 = time.perf_counter()
        super().paintEvent(event)
        self.last_paint_ms = (time.perf_counter() - t0) * 1000.0
        self.painted.emit()


def _single_shot(parent: QWidget, ms: int, slot) -> QTimer:
    timer = QTimer(parent)
    timer.setSingleShot(True)
    timer.setInterval(ms)
    timer.timeout.connect(slot)
    return timer


def grid_columns(count: int, width: float, height: float, rows: int, cols: int, row_overhead: float = 0.0) -> int:
    """The number of grid columns that gives each matrix cell the most pixels.

    ``row_overhead``: the pixels each grid row spends besides its matrices (title, token labels
    underneath, spacing); with 12 heads that decides between 3 × 4 squashed plots and 4 × 3."""
    best, best_cell = 1, -1.0
    for c in range(1, count + 1):
        r = math.ceil(count / c)
        cell = min(width / c / max(cols, 1), (height - r * row_overhead) / r / max(rows, 1))
        if cell > best_cell:
            best, best_cell = c, cell
    return best


def format_value(value: float) -> str:
    """The exact float32 value (its shortest round-trip form); −∞ says it was masked."""
    if np.isneginf(value):
        return MINUS_INFINITY
    return str(np.float32(value))


class MatrixView(QWidget):
    cell_clicked = Signal(int, int, int)  # head, row, col
    cell_double_clicked = Signal(int, int, int)  # plot head (the stage's own head index), row, col
    key_toggled = Signal(int, int, bool)  # Alt+click on a query × key cell: row, col, whole token (Shift)
    image_missing = Signal(int, str, object)  # generation, stage, colour scale (False, True, "log"): convert it
    # generation, stage, head, (r0, r1, c0, c1), levels: a zoomed region to reduce again from exact cells
    region_wanted = Signal(int, str, int, tuple, tuple)
    painted = Signal(int)  # generation on screen after a paint
    shown = Signal()  # the shown stage's images, titles and grid are all set (shown_stage is current)

    def __init__(self, state, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.plots: list[HeatmapPlot] = []
        self._pool: list[HeatmapPlot] = []
        self.shown_generation = 0
        self.shown_stage: Stage | None = None
        self._grid_key: tuple = ()
        self._column_widths: tuple = ()
        self._pool_target = 0
        self._waiting_for = 0  # plots a shown result needs that are still being built (0: none)
        self._pool_timer = QTimer(self)  # builds spare plots one per event-loop turn (warm_up)
        self._pool_timer.timeout.connect(self._grow_pool)
        # A result's work comes in event-loop turns of their own, each well under 50 ms, with
        # input handled in between: a new grid's layout; its images, ticks and titles; the paint.
        # Real timers, not zero ones: Qt handles events posted meanwhile in the same turn.
        self._refresh_timer = _single_shot(self, TURN_MS, self.refresh)
        self._release_paint = _single_shot(self, TURN_MS, self._paint_now)
        self.zoom = ZoomRegions(self)  # zooming and panning redraw the visible region from exact cells

        self.head_combo = QComboBox()
        self.head_combo.setToolTip("Show every head side by side, or one head large")
        self.head_combo.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.head_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.head_combo.setMinimumContentsLength(14)  # "All heads" / "Head 12 (kv 4)" in full
        self.colour_combo = QComboBox()
        self.colour_combo.addItems(COLOUR_SCALES)
        self.colour_combo.setToolTip(
            "Softmax weights: 0 to 1 (colours comparable between inputs), 0 to the largest weight "
            "shown, or log10 (many keys make every weight small). Signed stages always fit their data, "
            "symmetric about 0."
        )
        self.colour_combo.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.readout = QLabel(READOUT_HINT)
        self.readout.setObjectName("readout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens the view
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.range_label = QLabel()
        self.range_label.setObjectName("rangeLabel")
        # A line of its own: its text changes with every result, and in the controls' row it now
        # and then needed more than the view has: the splitter widened the centre and every
        # heatmap was laid out and painted again (the 40–130 ms stalls of a seed change).
        self.range_label.setMinimumWidth(1)
        self.range_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.canvas = _Canvas()
        self.canvas.setBackground("w")
        self.canvas.ci.setSpacing(GRID_SPACING)
        self.colour_bar = pg.ColorBarItem(values=(0, 1), colorMap=colour_map(True), interactive=False,
                                          colorMapMenu=False, width=16)  # fmt: skip
        # In the scene from the start, so Qt owns it: a pyqtgraph item that Python's garbage
        # collector destroys outside any scene can crash PySide6 (e.g. when no trace ever came).
        self._lay_out_grid([(self.colour_bar, 0, 1, 1)])

        top = QHBoxLayout()
        top.addWidget(QLabel("Show:"))
        top.addWidget(self.head_combo)
        top.addSpacing(12)
        top.addWidget(QLabel("Colours:"))
        top.addWidget(self.colour_combo)
        self.controls = top  # others add theirs with add_control (e.g. the difference view)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.range_label)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.readout)

        self.head_combo.activated.connect(lambda i: state.set_head(i - 1))
        self.colour_combo.currentIndexChanged.connect(lambda i: state.set_fit_colours(SCALE_VALUES[i]))
        self.canvas.scene().sigMouseMoved.connect(self._hover)
        self.canvas.scene().sigMouseClicked.connect(self._click)
        self.canvas.painted.connect(lambda: self.painted.emit(self.shown_generation))
        for signal in (state.trace_changed, state.stage_changed, state.head_changed, state.colours_changed):
            signal.connect(self.refresh)
        state.stage_image_added.connect(self._image_added)
        state.query_changed.connect(self._mark_query)
        self.numbers = CellNumbers(self)  # each cell's value written on it when there is room
        self.selection = CellSelection(self)  # Ctrl+arrows move an outlined cell, Enter explains it

    # --- painting --------------------------------------------------------------------------
    def refresh(self, *_) -> None:
        display = self.state.display
        if display is None or self.state.stage_name not in display.trace:
            return
        stage = display.trace[self.state.stage_name]
        self._sync_head_combo(stage)
        self._sync_colour_combo(stage)
        image = display.images.get(stage.name)
        # Converted for the other colour scale: ask again (what is on screen stays until it comes).
        stale = image is not None and image.sequential and image.fitted != self.state.fit_colours
        if image is None or stale:  # a big trace converts lazily: ask, and paint when it arrives
            if image is None:
                self.readout.setText(f"{PREPARING} {stage.title.lower()}…")
            self.image_missing.emit(display.generation, stage.name, self.state.fit_colours)
            return
        heads = self._heads_to_show(stage)
        self._hold_paint()  # the canvas paints once all is set, in a turn of its own
        if not self._ensure_plots(heads, stage):  # its heatmaps are built first, one per turn
            self.readout.setText(f"{PREPARING} {len(heads)} heatmaps…")
            return
        if self.readout.text().startswith(PREPARING):  # it came: the hint again, not a stale "Preparing…"
            self.readout.setText(READOUT_HINT)
        lut = lookup_table(image.sequential)
        for plot, head in zip(self.plots, heads):
            plot.head = head  # the index into this stage's heads (a key/value head for k, v of GQA)
            title = head_title(stage, head) if stage.per_head else stage.title
            plot.set_matrix(image.indices[head if stage.per_head else 0], lut, stage.row_labels, stage.col_labels,
                            title)  # fmt: skip
        self._fit_columns()
        if self.colour_bar.colorMap() is not colour_map(image.sequential):
            self.colour_bar.setColorMap(colour_map(image.sequential))
        self.colour_bar.setLevels(image.levels)
        self.colour_bar.setLabel("right", "log₁₀ weight" if image.sequential and image.scale == "log" else "")
        lo, hi = image.data_range
        if np.isfinite(lo):
            text = f"min {lo:.4g}   max {hi:.4g}"
        else:
            text = f"max {hi:.4g}" if np.isfinite(hi) else "no finite values"
        if image.nan_cells:
            text += f'   <span style="background:{NAN_HEX};color:white">&nbsp;pink&nbsp;</span> = NaN'
        if image.step != (1, 1):
            text += f"   {image.step[0]}×{image.step[1]} cells/pixel (peaks)"
        if image.masked_cells:
            text += f'   <span style="background:{MASKED_HEX};color:white">&nbsp;grey&nbsp;</span> = masked (−∞)'
        self.range_label.setText(text)
        self.range_label.setToolTip(text)  # the whole text when the row is too narrow for it
        self.shown_stage, self.shown_generation = stage, display.generation
        if image.step != (1, 1):  # a plot still zoomed in shows the new stage sharp too
            self.zoom.changed(*self.plots)
        self._mark_query()
        self._settle_layout()
        self.numbers.update()
        self.selection.sync()
        # Via a posted call: what this turn posted (other panels' layouts and paints) then runs
        # in the next turn, and the canvas paints in the one after, alone.
        QTimer.singleShot(0, self._release_paint.start)
        self.shown.emit()

    def _image_added(self, name: str) -> None:
        """Background conversions arrive for every stage; only the one on screen matters here."""
        if name == self.state.stage_name:
            self.refresh()

    def _heads_to_show(self, stage: Stage) -> list[int]:
        if not stage.per_head:
            return [0]
        if self.state.head == ALL_HEADS:
            return list(range(stage.heads))
        head = array_head(stage, self.state.head)  # the chosen query head's key/value head, for GQA
        return [head] if head < stage.heads else list(range(stage.heads))

    def _ensure_plots(self, heads: list[int], stage: Stage) -> bool:
        """(Re)build the grid when the number of plots or the best column count changes; False
        (and the grid unchanged) while the pool is still short of plots: they are then built in
        event-loop turns of their own (~15 ms each, 60 ms for four: the stall of a first load)
        and the view refreshes once they are all there."""
        if len(self._pool) < len(heads):
            self._waiting_for = len(heads)
            self.warm_up(len(heads))
            return False
        self._waiting_for = 0
        size = self.canvas.size()
        columns = grid_columns(len(heads), size.width() - 90, size.height(), len(stage.row_labels),
                               len(stage.col_labels), PLOT_OVERHEAD_PX)  # fmt: skip
        key = (len(heads), columns)
        if key == self._grid_key:
            return True
        self._refresh_timer.start()  # the images in a later turn: a new grid's layout is one turn's work
        self._grid_key, self._column_widths = key, ()
        # PlotItems are slow to build (~10 ms each, menus included): kept and reused.
        self.plots = self._pool[: len(heads)]
        overhang = EDGE_OVERHANG_PX if columns == 1 else GRID_SPACING // 2
        for i, plot in enumerate(self.plots):
            # Shown first: a hidden axis sizes itself to 0 px (pyqtgraph), and would grow back while
            # painting, which re-lays out the whole grid and paints it a second time.
            plot.plot.show()
            # Row labels once per grid row, on the left: more room for the matrices.
            plot.plot.showAxis("left", i % columns == 0)
            # Edge labels may reach into the margin of a single matrix, not into a neighbour's.
            if plot.bottom.style["hideOverlappingLabels"] != overhang:
                plot.bottom.setStyle(hideOverlappingLabels=overhang)
        for spare in self._pool[len(heads) :]:
            spare.plot.hide()  # kept (hidden) for the next bigger grid: a model switched back to
        cells = [(plot.plot, i // columns, i % columns, 1) for i, plot in enumerate(self.plots)]
        self._lay_out_grid([*cells, (self.colour_bar, 0, columns, math.ceil(len(heads) / columns))])
        return False

    def _lay_out_grid(self, cells: list[tuple]) -> None:
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
        for item, row, col, rowspan in cells:
            layout.addItem(item, row, col, rowspan, 1)
        # The view's whole width again: the last resize may have been clamped to a narrower grid's maximum.
        self.canvas.ci.setGeometry(self.canvas.range)
        self._settle_layout()  # once, so that geometry (hover, column widths) is right at once

    def _settle_layout(self) -> None:
        """Lay the grid out now, inner layouts first, rather than from posted events after the paint.

        A plot whose own layout changed (axis shown or hidden, widths, title) has a layout request
        pending; handled after the grid is laid out, it invalidates the grid again, so that the
        whole grid would be laid out twice and painted twice (the first time with stale geometry).
        Activated here, the pending requests find nothing left to do."""
        for plot in self.plots:
            plot.plot.layout.activate()
        self.canvas.ci.layout.activate()

    def _add_spare(self) -> None:
        spare = HeatmapPlot(len(self._pool))
        spare.plot.getViewBox().sigRangeChanged.connect(lambda *_a, p=spare: self.zoom.changed(p))
        spare.set_title(f"Head {len(self._pool) + 1}")  # its likely title (all heads), ready in advance
        spare.plot.hide()  # first: a visible item added to the scene repaints where it lands
        spare.plot.setParentItem(self.canvas.ci)  # in the scene from the start (see _lay_out_grid)
        self._pool.append(spare)

    def warm_up(self, plots: int) -> None:
        """Build spare plots in idle time, one per event-loop turn (~10 ms each), up to ``plots``:
        called while a model loads, so that its first result (12 heads, say) does not stall the
        window for the 100 ms it takes to build them all at once."""
        self._pool_target = max(self._pool_target, plots)
        if len(self._pool) < self._pool_target:
            # A result waiting for its plots: one per turn. Else a few ms apart, so that one build
            # (~8 ms) and not two shares a turn with whatever else comes (a repaint, a result).
            self._pool_timer.start(0 if self._waiting_for else IDLE_BUILD_MS)

    @property
    def building(self) -> bool:
        """True while the result on screen waits for heatmaps still being built."""
        return self._waiting_for > 0 or self._refresh_timer.isActive() or self.paint_held

    @property
    def paint_held(self) -> bool:
        return not self.canvas.viewport().updatesEnabled()

    def flush(self) -> None:
        """Do now what waits for later turns (heatmaps still to build, a new grid's images, the
        paint): for tests and exports, as napari's force_sync."""
        if self._waiting_for:
            while len(self._pool) < self._waiting_for:
                self._add_spare()
            self._refresh_timer.start()
        for _ in range(2):  # a grid built by the refresh below asks for one more
            if self._refresh_timer.isActive():
                self._refresh_timer.stop()
                self.refresh()
        if self.paint_held:
            self._release_paint.stop()
            self._paint_now()

    def _hold_paint(self) -> None:
        """No canvas paint until the result is all set (_release_paint): one paint per result,
        never one of a half-set grid, and not in the turn that set it."""
        self._release_paint.stop()
        self.canvas.viewport().setUpdatesEnabled(False)

    def _paint_now(self) -> None:
        self.canvas.viewport().setUpdatesEnabled(True)  # which repaints it

    def _grow_pool(self) -> None:
        if len(self._pool) < self._pool_target:
            self._add_spare()
        if len(self._pool) >= self._pool_target:  # done: no idle tick left running
            self._pool_timer.stop()
        if self._waiting_for and len(self._pool) >= self._waiting_for:
            QTimer.singleShot(0, self.refresh)  # a turn of its own, not the last plot's

    def _fit_columns(self) -> None:
        """Give every matrix of a grid the same width: the first column also holds the row labels,
        so it gets exactly their width more than the others."""
        columns = self._grid_key[1] if self._grid_key else 1
        if columns < 2 or not self.plots:
            return
        room = self.plots[0].left.label_room()
        bar = self.colour_bar.geometry().width() or COLOUR_BAR_PX
        left, _top, right, _bottom = self.canvas.ci.layout.getContentsMargins()
        usable = self.canvas.viewport().width() - bar - left - right - GRID_SPACING * columns - 4
        image = round(max(40.0, (usable - room) / columns))
        if (room, image) == self._column_widths:
            return  # unchanged: setting them again would re-lay out and repaint the whole grid
        self._column_widths = (room, image)
        for plot in self.plots[::columns]:
            plot.left.setWidth(room)
        self.canvas.ci.layout.setColumnFixedWidth(0, image + room)
        for c in range(1, columns):
            self.canvas.ci.layout.setColumnFixedWidth(c, image)

    def _sync_head_combo(self, stage: Stage) -> None:
        # Always the query heads (a GQA model's k and v show the key/value head a query head reads).
        heads = max(s.heads for s in self.state.display.trace.stages)
        groups = next((s.head_groups for s in self.state.display.trace.stages if s.head_groups), None)
        wanted = ["All heads"] + [f"Head {i + 1}" + (f" (kv {groups[i] + 1})" if groups else "") for i in range(heads)]
        with signals_blocked(self.head_combo):
            if [self.head_combo.itemText(i) for i in range(self.head_combo.count())] != wanted:
                self.head_combo.clear()
                self.head_combo.addItems(wanted)
            self.head_combo.setCurrentIndex(self.state.head + 1 if self.state.head < heads else 0)
        self.head_combo.setEnabled(stage.per_head)

    def _sync_colour_combo(self, stage: Stage) -> None:
        with signals_blocked(self.colour_combo):
            self.colour_combo.setCurrentIndex(SCALE_VALUES.index(self.state.fit_colours))
        self.colour_combo.setEnabled(stage.name in SEQUENTIAL_STAGES)  # signed stages always fit

    def _mark_query(self, *_) -> None:
        row = self.state.query if self._rows_are_queries() else -1
        for plot in self.plots:
            plot.mark_row(row)

    def _rows_are_queries(self) -> bool:
        display, stage = self.state.display, self.shown_stage
        return display is not None and stage is not None and stage.row_labels == display.trace.query_tokens

    def resizeEvent(self, event):  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if self.shown_stage is not None and len(self.plots) > 1:
            self.refresh()  # the best grid shape depends on the aspect ratio

    # --- mouse -----------------------------------------------------------------------------
    def _cell_at(self, scene_pos) -> tuple[HeatmapPlot, int, int] | None:
        for plot in self.plots:
            cell = plot.cell_at(scene_pos)
            if cell is not None:
                return plot, *cell
        return None

    def _hover(self, scene_pos) -> None:
        hit, stage = self._cell_at(scene_pos), self.shown_stage
        if hit is None or stage is None:
            return
        plot, row, col = hit
        value = stage.cell(plot.head, row, col)
        text = format_value(value)
        if stage.name == "weights" and self._was_masked(plot.head, row, col):
            text += " (masked)"
        where = f"{head_name(stage, plot.head)} · " if stage.per_head else ""
        self.readout.setText(
            f"{where}row {row} <b>{escape(stage.row_labels[row])}</b> · "
            f"col {col} <b>{escape(stage.col_labels[col])}</b> = <b>{text}</b>"
        )

    def _was_masked(self, head: int, row: int, col: int) -> bool:
        trace = self.state.display.trace
        return "masked" in trace and bool(np.isneginf(trace["masked"].cell(head, row, col)))

    def _click(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        hit = self._cell_at(event.scenePos())
        if hit is not None:
            plot, row, col = hit
            if event.double():
                self.cell_double_clicked.emit(plot.head, row, col)
                return
            modifiers = event.modifiers()
            if modifiers & Qt.KeyboardModifier.AltModifier and self.shown_stage is not None \
                    and self.shown_stage.col_axis == "key":  # fmt: skip
                self.key_toggled.emit(row, col, bool(modifiers & Qt.KeyboardModifier.ShiftModifier))
                return
            self.cell_clicked.emit(self._query_head(plot.head), row, col)

    def add_control(self, widget: QWidget) -> None:
        """Put ``widget`` in the row of controls, after Show and Colours."""
        self.controls.insertSpacing(self.controls.count() - 1, 12)
        self.controls.insertWidget(self.controls.count() - 1, widget)

    def _query_head(self, head: int) -> int:
        """The query head a click on plot head ``head`` means: for a key/value head of a GQA
        model, the focused query head when it reads that one, else the first that does."""
        stage = self.shown_stage
        if stage is None or not is_kv_stage(stage):
            return head
        readers = query_heads_of(stage, head)
        return self.state.focus_head if self.state.focus_head in readers else readers[0]

    # --- for tests and export -------------------------------------------------------------
    def shown_values(self) -> np.ndarray:
        """The exact float matrices on screen, (plots, rows, cols)."""
        stage = self.shown_stage
        return np.stack([stage.head(p.head) for p in self.plots])

    def shown_indices(self) -> np.ndarray:
        """The uint8 colour indices the image items paint, (plots, rows', cols')."""
        return np.stack([p.image.image for p in self.plots])

