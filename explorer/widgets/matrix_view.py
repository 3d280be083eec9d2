"""The heatmaps of the shown stage: all heads in a grid or one head, a colour bar, and a read-out
of the exact value under the mouse. Given the state (duck-typed: widgets do not import it), it
repaints on trace/stage/head changes: uint8 images converted on the worker; the exact floats come
from ``values``, read off the GUI thread (stage_rows.StageRows). A new result's heatmaps come in
turns after the result's own, phases of the window's frame scheduler (explorer.widgets.frames: a
new grid's layout, its new labels, its images, then one paint of the canvas alone)."""

from __future__ import annotations

import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QVBoxLayout, QWidget
from superqt.utils import signals_blocked

from explorer.heads import clicked_query_head, head_title, heads_shown
from explorer.images.plot_pixels import cells
from explorer.widgets.cell_numbers import CellNumbers
from explorer.widgets.cell_selection import CellSelection
from explorer.widgets.colormaps import colour_map, lookup_table, range_legend
from explorer.widgets.control_row import ControlRow, labelled
from explorer.widgets.frames import Frames
from explorer.widgets.heatmap_grid import GRID_SPACING, LAID_OUT, READY, HeatmapGrid
from explorer.widgets.heatmap_plot import HeatmapPlot
from explorer.widgets.hover_readout import MINUS_INFINITY, HoverReadout, format_value
from explorer.widgets.labels import rich_safe
from explorer.widgets.long_overlay import side_plot
from explorer.widgets.range_line import READOUT_ONE_LINE, RangeLine
from explorer.widgets.stage_rows import StageRows
from explorer.widgets.token_axis import axis_title, set_axis_title
from explorer.widgets.zoom_regions import ZoomRegions, device_pixels, visible_region
from models.engine.colour_index import SEQUENTIAL_STAGES
from models.engine.pixels import ENLARGE, block_step
from models.engine.trace import Stage

__all__ = ["MINUS_INFINITY", "MatrixView", "format_value"]
READOUT_HINT = "Hover: a cell's exact value · click a row: focus on it"
PREPARING = "Preparing"  # the readout while a stage's image or its heatmaps are on their way
COLOUR_SCALES = ("auto", "0 to 1", "fit to data", "log")  # state.fit_colours: "auto", False, True, "log"
SCALE_VALUES = ("auto", False, True, "log")
AUTO_TEXT = {"log": "auto: log₁₀", "unit": "auto: 0 to 1", "fit": "auto: fit"}  # the tooltip says why
NORMS_AUTO = "auto: 0 to largest"  # a norm has no top of 1: "auto" paints 0 to the largest shown
SIGNED_AUTO = "± largest"  # a signed stage (the box disabled): symmetric about 0, to the largest |value|


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


def _scale_index(fit: bool | str) -> int:
    """The colour box's entry for state.fit_colours (False is not "auto", True is not 1)."""
    if isinstance(fit, str):
        return SCALE_VALUES.index(fit)
    return 2 if fit else 1


class MatrixView(QWidget):
    cell_clicked = Signal(int, int, int)  # head, row, col
    cell_double_clicked = Signal(int, int, int)  # plot head (the stage's own head index), row, col
    key_toggled = Signal(int, int, bool)  # Alt+click on a query × key cell: row, col, whole token (Shift)
    image_missing = Signal(int, str, object, object)  # generation, stage, colour scale, PlotsOnScreen: make it
    # regions to reduce again from exact cells at the pixels they are drawn on (r0, r1, c0, c1; rows, cols)
    regions_wanted = Signal(int, str, object)  # generation, stage, [(head, region, levels, device pixels)]
    painted = Signal(int)  # generation on screen after a paint
    shown = Signal()  # the shown stage's images, titles and grid are all set (state.stepper is current)

    def __init__(self, state, parent: QWidget | None = None, jobs=None, frames: Frames | None = None):
        """``jobs``: the window's read jobs (explorer.jobs.ReadJobs), through which every exact
        float shown is read; None reads them in the caller's turn (a view on its own). ``frames``:
        the window's frame scheduler, whose phases this view's work runs in (its own when None)."""
        super().__init__(parent)
        self.frames = frames if frames is not None else Frames(self)
        self.state = state
        self.values = StageRows(jobs)  # the shown trace's rows as they arrive
        # A change's work comes in event-loop turns of its own, each well under 50 ms, with input handled
        # in between: the change and the other panels; a new grid's layout; its labels and titles; its
        # images; the paint of the canvas alone (held until then).
        self._refresh_soon = self.frames.turn("images", lambda: self.refresh(in_turns=True))
        self.paint_soon = self.frames.turn("paint", self._paint_now)
        self.zoom = ZoomRegions(self)  # zooming and panning redraw the visible region from exact cells
        # The GUI is also busy while heatmaps are being built or the paint is held. Zoomed regions on
        # their way are not the GUI's work but the worker's (it would wait for itself): settled() has them.
        self.frames.watch(lambda: self.grid.waiting_for > 0 or self.paint_held)

        self.head_combo = QComboBox()
        self.head_combo.setToolTip("Show every head side by side, or one head large")
        self.head_combo.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.head_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.head_combo.setMinimumContentsLength(14)  # "All heads" / "Head 12 (kv 4)" in full
        self.colour_combo = QComboBox()
        self.colour_combo.addItems(COLOUR_SCALES)
        # As wide as its longest text from the start ("auto: 0 to 1"): never cut, and a text
        # that changes with the data never changes the width (a new width re-lays out the whole view).
        self.colour_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        texts = (*COLOUR_SCALES, *AUTO_TEXT.values(), NORMS_AUTO, SIGNED_AUTO)
        self.colour_combo.setMinimumContentsLength(max(len(t) for t in texts))
        self.colour_combo.setToolTip(
            "Softmax weights: auto (log10 once rows hold more than 256 keys, where every weight is small; "
            "else 0 to 1), 0 to 1 (colours comparable between inputs), 0 to the largest weight shown, or "
            "log10. Signed stages always fit their data, symmetric about 0."
        )
        self.colour_combo.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.readout = RangeLine("readout", Qt.AlignmentFlag.AlignLeft, READOUT_ONE_LINE)  # never widens the view
        self.readout.setText(READOUT_HINT)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.range_label = RangeLine()  # its height follows the view's width, never its text (widgets/range_line.py)
        self._range_text = ""
        self.canvas = _Canvas()
        self.canvas.setBackground("w")
        self.canvas.ci.setSpacing(GRID_SPACING)
        self.colour_bar = pg.ColorBarItem(values=(0, 1), colorMap=colour_map(True), interactive=False,
                                          colorMapMenu=False, width=16)  # fmt: skip
        self.grid = HeatmapGrid(self.canvas, self.colour_bar, self._wire_plot, self._refresh_soon.request)

        # Wraps when narrow: a window half a 1920 px screen wide (it made the window 1,256 px at least)
        top = ControlRow()
        top.addWidget(labelled("Show:", self.head_combo))
        top.addWidget(labelled("Colours:", self.colour_combo))
        self.controls = top  # others add theirs with add_control (e.g. the difference view)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.range_label)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.readout)

        self.head_combo.activated.connect(lambda i: state.set_head(i - 1))
        self.colour_combo.currentIndexChanged.connect(lambda i: state.set_fit_colours(SCALE_VALUES[i]))
        self.hint = READOUT_HINT  # the line when no cell is hovered
        self.hover = HoverReadout(self)  # the exact value under the mouse
        self.canvas.scene().sigMouseClicked.connect(self._click)
        self.canvas.painted.connect(lambda: self.painted.emit(self.state.stepper.generation))
        self.canvas.painted.connect(lambda: self.frames.end("painted"))
        self._read_ahead: tuple | None = None  # (stage names, heads) to read once painted
        self.canvas.painted.connect(self._read_ahead_now)
        # A new result shares its turn with every other panel's update: the heatmaps come in later ones.
        state.trace_changed.connect(self._refresh_soon.request)
        for signal in (state.stage_changed, state.head_changed, state.colours_changed):
            # A new result's stage and head come after trace_changed: its refresh, to come, draws them.
            signal.connect(lambda *_: None if self._refresh_soon.pending else self.refresh())
        state.stage_image_added.connect(self._image_added)
        # A new result's query: the refresh to come marks it (marking the old plots asked for a layout)
        state.query_changed.connect(lambda *_: None if self._refresh_soon.pending else self._mark_query())
        self.numbers = CellNumbers(self)  # each cell's value written on it when there is room
        self.selection = CellSelection(self)  # Ctrl+arrows move an outlined cell, Enter explains it

    # --- painting --------------------------------------------------------------------------
    @property
    def plots(self) -> list[HeatmapPlot]:
        return self.grid.plots

    def refresh(self, *_, in_turns: bool = False) -> None:
        """Show the shown stage. ``in_turns`` (a result): new labels and titles in a turn of their own."""
        self._refresh_soon.cancel()  # done now
        display = self.state.display
        if display is None or self.state.stage_name not in display.trace:
            return
        stage = display.trace[self.state.stage_name]
        self._sync_head_combo(stage)
        image = display.images.get(stage.name)
        self._sync_colour_combo(stage, image)
        # Converted for the other colour scale: ask again (what is on screen stays until it comes).
        if image is not None and image.sequential and image.fitted != self.state.fit_colours:
            self.zoom.ask_stage(display, stage)
            if self.paint_held:  # a grid left half-set: never frozen until the image comes
                self.paint_soon.request()
            return
        heads = heads_shown(stage, self.state.head)
        self.hold_paint()  # the canvas paints once all is set, in a turn of its own
        grid = self.grid.ensure(len(heads), *cells(stage), side_plot(stage))
        if grid != READY:  # heatmaps still being built, or a new grid laid out: filled in a later turn
            if grid == LAID_OUT:
                self._refresh_soon.request()
            self.readout.setText(f"{PREPARING} {len(heads)} heatmaps…")
            return
        cross, frame = bool(display.trace.config.get("cross")), (stage.row_labels, stage.col_labels)
        axes = (axis_title(stage.row_axis, cross), axis_title(stage.col_axis, cross))
        titles = [head_title(stage, head) if stage.per_head else stage.title for head in heads]
        if image is None:  # not made with its run (a big trace's stage, a new grid): laid out, then asked
            self._set_frames(frame, titles, axes)  # its labels take their room first
            self.readout.setText(f"{PREPARING} {stage.title.lower()}…")
            self.zoom.ask_stage(display, stage, cells(stage))
            return  # the paint waits for it a little (a failed request asks again: request_failed)
        if in_turns and not all(plot.framed(*frame, title, axes) for plot, title in zip(self.plots, titles)):
            # New labels or titles lay the grid out again (labels measured, upright or not): in a
            # turn of their own, the images in the next, so that neither turn is long.
            self._set_frames(frame, titles, axes)
            self._refresh_soon.request()
            return
        if self.readout.text().startswith(PREPARING):  # it came: the hint again, not a stale "Preparing…"
            self.readout.setText(READOUT_HINT)
        lut = lookup_table(image.sequential)
        for plot, head, title in zip(self.plots, heads, titles):
            plot.head = head  # the index into this stage's heads (a key/value head for k, v of GQA)
            plot.set_matrix(image.indices[head if stage.per_head else 0], lut, *frame, title, axes, image.structure)
        self.grid.fit_columns()
        if self.colour_bar.colorMap() is not colour_map(image.sequential):
            self.colour_bar.setColorMap(colour_map(image.sequential))
        self.colour_bar.setLevels(image.levels)
        log = image.sequential and image.scale == "log"
        # Every bar says what its colours are (the linear ones had no title)
        set_axis_title(self.colour_bar.getAxis("right"), "log₁₀ weight" if log else rich_safe(stage.title))
        self._range_text = range_legend(image)
        if self.state.stepper.set_shown(display.generation, stage):  # the one place it is set
            self.zoom.forget()
        self.values.follow(display.trace, display.values)
        # A small stage is read whole in advance, once it is painted (the read never delays the
        # paint): hovering it, and its numbers, then never wait.
        self._read_ahead = ((stage.name, "masked") if stage.name == "weights" else (stage.name,), heads)
        self._mark_query()
        self.grid.settle_layout()
        self.zoom.now(*self.plots)  # each plot at its own device pixels, zoomed or not
        self.update_range_line()
        self.numbers.update()
        self.selection.sync()
        self.paint_soon.request()
        self.shown.emit()

    def _set_frames(self, frame: tuple, titles: list[str], axes: tuple[str, str]) -> None:
        """Every plot's labels and title, the grid laid out for them now."""
        for plot, title in zip(self.plots, titles):
            plot.set_frame(*frame, title, axes)
        self.grid.fit_columns()
        self.grid.settle_layout()

    def request_failed(self) -> None:
        """A newer request failed: the picture on screen stays, its regions are asked again, and so is its
        image if one was on its way (the worker dropped that ask for the request that failed)."""
        self.zoom.forget()
        self.zoom.now(*self.plots)
        if self.paint_held:
            self.refresh()

    def _read_ahead_now(self) -> None:
        if self._read_ahead is not None:
            (names, heads), self._read_ahead = self._read_ahead, None
            self.values.prefetch(names, heads)

    def update_range_line(self) -> None:
        """The values' range, and how many cells one screen pixel holds (from the first plot's
        visible region and its device pixels): when more than one, peaks are kept and enlarged."""
        text = self._range_text
        if self.plots and self.state.stepper.stage is not None:
            plot = self.plots[0]
            r0, r1, c0, c1 = visible_region(plot)
            rows_px, cols_px = device_pixels(plot, self.canvas.devicePixelRatioF())
            kr, kc = block_step(max(0, r1 - r0), rows_px), block_step(max(0, c1 - c0), cols_px)
            if (kr, kc) != (1, 1):
                text += f"   1 screen pixel: {kr}×{kc} cells, their peak (enlarged to {ENLARGE}×{ENLARGE} px)"
        if text != self.range_label.text():
            self.range_label.setText(text)
            self.range_label.setToolTip(text)  # the whole text when the row is too narrow for it

    def _image_added(self, name: str) -> None:
        """Background conversions arrive for every stage; only the one on screen matters here."""
        if name == self.state.stage_name:
            self.refresh()

    def _wire_plot(self, plot: HeatmapPlot) -> None:
        box = plot.plot.getViewBox()
        box.sigRangeChanged.connect(lambda *_a: self.zoom.changed(plot))
        box.sigResized.connect(lambda *_a: self.zoom.changed(plot))  # new pixels: reduce to them again

    def warm_up(self, plots: int) -> None:
        """Build heatmaps in idle time (while a model loads) up to ``plots``."""
        self.grid.warm_up(plots)

    def settled(self) -> bool:
        """True when what was asked is on screen: no phase of the frame scheduler to come, no zoomed
        region on its way, no long input's overview streaming in (tests and screenshots wait for it)."""
        display, stage = self.state.display, self.state.stepper.stage
        image = display.images.get(stage.name) if display is not None and stage is not None else None
        return not self.frames.busy and not self.zoom.pending and not (image is not None and image.progress < 1)

    @property
    def paint_held(self) -> bool:
        return not self.canvas.viewport().updatesEnabled()

    def flush(self) -> None:
        """Do now what waits for later turns (heatmaps to build, a refresh, the paint): for
        tests and exports, as napari's force_sync."""
        if self.grid.waiting_for:
            self.grid.build_now()
            self._refresh_soon.request()
        for _ in range(3):  # a new grid laid out, then its labels and titles, then its images
            self._refresh_soon.flush()
        self.paint_soon.flush()
        self.frames.end("painted")  # a flush paints by grab or render, not by a paint event

    def hold_paint(self) -> None:
        """No canvas paint until the change is all set (paint_soon): one paint per change,
        never one of a half-set grid, and not in the turn that set it."""
        self.paint_soon.cancel()
        self.canvas.viewport().setUpdatesEnabled(False)
        self.frames.check()

    def _paint_now(self) -> None:
        if self.canvas.isVisible():  # busy until the canvas has painted (a hidden one never does)
            self.frames.begin("painted")
        self.canvas.viewport().setUpdatesEnabled(True)  # which repaints it

    def _sync_head_combo(self, stage: Stage) -> None:
        # Always the query heads (a GQA model's k and v show the key/value head a query head reads).
        heads = max(s.heads for s in self.state.display.trace.stages)
        groups = next((s.head_groups for s in self.state.display.trace.stages if s.head_groups), None)
        wanted = ["All heads"] + [f"Head {i}" + (f" (kv {groups[i]})" if groups else "") for i in range(heads)]
        with signals_blocked(self.head_combo):
            if [self.head_combo.itemText(i) for i in range(self.head_combo.count())] != wanted:
                self.head_combo.clear()
                self.head_combo.addItems(wanted)
            self.head_combo.setCurrentIndex(self.state.head + 1 if self.state.head < heads else 0)
        self.head_combo.setEnabled(stage.per_head)

    def _sync_colour_combo(self, stage: Stage, image) -> None:
        """The box says the scale painted: "auto"'s choice for weights and norms, a signed stage's own."""
        chooses = stage.name in SEQUENTIAL_STAGES
        with signals_blocked(self.colour_combo):
            if image is not None and image.sequential:  # what "auto" chose, said in the box
                norms = stage.name != "weights" and image.scale == "unit"  # 0 to their largest (colour_levels)
                self.colour_combo.setItemText(0, NORMS_AUTO if norms else AUTO_TEXT.get(image.scale, "auto"))
            elif image is not None and not chooses:
                self.colour_combo.setItemText(0, SIGNED_AUTO)
            self.colour_combo.setCurrentIndex(_scale_index(self.state.fit_colours) if chooses else 0)  # choice kept
        self.colour_combo.setEnabled(chooses)  # signed stages always fit

    def _mark_query(self, *_) -> None:
        row = self.state.query if self._rows_are_queries() else -1
        for plot in self.plots:
            plot.mark_row(row)

    def _rows_are_queries(self) -> bool:
        display, stage = self.state.display, self.state.stepper.stage
        return display is not None and stage is not None and stage.row_labels == display.trace.query_tokens

    def resizeEvent(self, event):  # noqa: N802 - Qt API
        super().resizeEvent(event)
        stage = self.state.stepper.stage
        # The best grid shape depends on the aspect ratio: lay it out again only when it changes
        # (a refresh on every resize fed a loop: paint, the range line's new text, a resize, ...).
        if stage is not None and len(self.plots) > 1 and self.grid.shape_changes(
                len(self.plots), *cells(stage), side_plot(stage)):  # fmt: skip
            self._refresh_soon.request()
        else:  # the same grid: its columns' fixed widths follow the new width (they were set for the
            self.grid.fit_columns()  # widest it had been: shrunk, heads and the colour bar were cut off)

    # --- mouse -----------------------------------------------------------------------------
    def cell_at(self, scene_pos) -> tuple[HeatmapPlot, int, int] | None:
        for plot in self.plots:
            cell = plot.cell_at(scene_pos)
            if cell is not None:
                return plot, *cell
        return None

    def _click(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        hit = self.cell_at(event.scenePos())
        if hit is not None:
            plot, row, col = hit
            if event.double():
                self.cell_double_clicked.emit(plot.head, row, col)
                return
            modifiers = event.modifiers()
            if modifiers & Qt.KeyboardModifier.AltModifier and self.state.stepper.stage is not None \
                    and self.state.stepper.stage.col_axis == "key":  # fmt: skip
                self.key_toggled.emit(row, col, bool(modifiers & Qt.KeyboardModifier.ShiftModifier))
                return
            query_head = clicked_query_head(self.state.stepper.stage, plot.head, self.state.focus_head)
            self.cell_clicked.emit(query_head, row, col)

    def add_control(self, widget: QWidget) -> None:
        """Put ``widget`` in the row of controls, after Show and Colours."""
        self.controls.addWidget(widget)

    # --- for tests and export -------------------------------------------------------------
    def shown_values(self) -> np.ndarray:
        """The exact float matrices on screen, (plots, rows, cols), read from the stage here (tests:
        the app itself never calls it, it reads through ``values``)."""
        stage = self.state.stepper.stage
        return np.stack([stage.head(p.head) for p in self.plots])

    def shown_indices(self) -> np.ndarray:
        """The uint8 colour indices the image items paint, (plots, rows', cols')."""
        return np.stack([p.image.image for p in self.plots])
