"""File → Time machine…: follow every head of a model through its training checkpoints.

- a banner: the history's integrity (steps that hold the same weights named first, in red);
- a step slider; the main window follows it (``on_step(path)``), as the training timeline does;
- the layers × heads grid at that step, each head coloured by its similarity to the head it was
  matched to at the previous step (1: unchanged; low: the head changed what it does), a renumbered
  head marked "was H2";
- the events (a head taking or leaving a role between two steps), a click moves the slider there;
- one cell's ``why`` over the steps: the score's largest query-source × key-source terms as signed
  stacked areas (positive terms above 0, negative below), the score as a black line.

Handed a :class:`~explorer.engine.time_machine_data.TimeMachine` and callbacks, never the main window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QListWidget, QSlider, QSplitter, QVBoxLayout, QWidget

import explorer.widgets  # noqa: F401 - pyqtgraph's text near black (explorer/widgets/__init__.py)
from explorer.engine.time_machine_data import TimeMachine
from explorer.panels.timeline_window import head_colour
from explorer.widgets.cell_axis import CellAxis, head_cells, layer_cells

TERMS_SHOWN = 6  # the why plot's largest terms; the rest summed as "others"


def largest_terms(series: dict, count: int = TERMS_SHOWN) -> list[tuple[str, np.ndarray]]:
    """``[(label, values over the steps)]``: the ``count`` terms of largest magnitude at any step, then
    the others summed (so the areas add up to the score at every step)."""
    terms = [(f"{t['query']} · {t['key']}", np.asarray(t["values"], dtype=float)) for t in series["terms"]]
    terms.sort(key=lambda t: -np.abs(t[1]).max())
    shown, rest = terms[:count], terms[count:]
    if rest:
        shown.append((f"{len(rest)} others", np.sum([v for _, v in rest], axis=0)))
    return shown


class TimeMachineWindow(QWidget):
    step_changed = Signal(int)

    def __init__(self, tm: TimeMachine, on_step: Callable[[Path], None] | None = None,
                 on_head: Callable[[int, int], None] | None = None, parent: QWidget | None = None):  # fmt: skip
        super().__init__(parent, Qt.WindowType.Window)
        self.tm = tm
        self.on_step = on_step or (lambda path: None)
        self.on_head = on_head or (lambda layer, head: None)
        self.setWindowTitle(f"Time machine: {tm.name}")
        integrity = tm.history.integrity
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        if integrity.broken:
            self.banner.setText(integrity.message())
            self.banner.setStyleSheet("color: #b00020; font-weight: bold;")
        else:
            self.banner.setText(f"{len(tm.steps)} checkpoints, each holding its own weights (content hashes checked).")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, len(tm.steps) - 1)
        self.slider.setPageStep(1)
        self.step_label = QLabel()
        self.step_label.setMinimumWidth(160)
        row = QHBoxLayout()
        row.addWidget(QLabel("Step"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.step_label)
        self.grid = pg.GraphicsLayoutWidget()
        self.grid.setBackground("w")
        self._build_grid()
        self.events = QListWidget()
        self.events.setWordWrap(True)
        self.events.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        for event in tm.history.events:
            self.events.addItem(event.text())
        if not tm.history.events:
            self.events.addItem("No head crosses a role's threshold between these steps.")
        self.events.currentRowChanged.connect(self._event_chosen)
        self.why_plot = pg.PlotWidget(background="w")
        self._build_why()
        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(self.grid)
        side = QWidget()
        side_column = QVBoxLayout(side)
        side_column.setContentsMargins(0, 0, 0, 0)
        side_column.addWidget(QLabel("Events: a head takes (or leaves) a role between two steps"))
        side_column.addWidget(self.events, 1)
        top.addWidget(side)
        top.setSizes([620, 380])  # the grid, its colour bar and its numbers
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(self.why_plot)
        split.setSizes([380, 420])
        column = QVBoxLayout(self)
        column.addWidget(self.banner)
        column.addLayout(row)
        column.addWidget(split, 1)
        self.slider.valueChanged.connect(self._moved)
        self.slider.setValue(len(tm.steps) - 1)
        self._moved(self.slider.value())

    # --- the heads' grid ---------------------------------------------------------------------
    def _build_grid(self) -> None:
        L, h = self.tm.history.detectors["previous"].shape[1:]
        axes = {"bottom": CellAxis("bottom"), "left": CellAxis("left")}  # thinned to what fits (30 layers)
        plot = self.grid.addPlot(row=0, col=0, title="Each head's similarity to its previous match",
                                 axisItems=axes)  # fmt: skip
        plot.setMouseEnabled(False, False)
        plot.hideButtons()
        plot.invertY(True)
        plot.setAspectLocked(False)
        self.image = pg.ImageItem(axisOrder="row-major")
        plot.addItem(self.image)
        axes["bottom"].set_cells(head_cells(h))
        axes["left"].set_cells(layer_cells(L))
        plot.setXRange(0, h, padding=0)
        plot.setYRange(0, L, padding=0)
        self.bar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get("viridis"), interactive=False,
                                   label="similarity (Pearson r of the maps)")  # fmt: skip
        self.bar.setImageItem(self.image, insert_in=plot)
        self.bar.getAxis("right").enableAutoSIPrefix(False)
        self.cell_texts = [[pg.TextItem(anchor=(0.5, 0.5)) for _ in range(h)] for _ in range(L)]
        for layer in range(L):
            for head in range(h):
                self.cell_texts[layer][head].setPos(head + 0.5, layer + 0.5)
                plot.addItem(self.cell_texts[layer][head])
        self.image.mouseClickEvent = self._grid_clicked
        self.grid_plot = plot
        plot.getViewBox().sigResized.connect(lambda *_a: self._fit_texts())

    @property
    def texts_shown(self) -> bool:
        """True when the grid's cells carry their texts (similarity, "was H2"): only when every text fits its cell."""
        return self.cell_texts[0][0].isVisible()

    def _fit_texts(self) -> None:
        """Each cell's text only when every one fits its cell at the grid's size now (30 layers × 9 heads:
        the colours alone, the title says so)."""
        L, h = len(self.cell_texts), len(self.cell_texts[0])
        box = self.grid_plot.getViewBox()
        rects = [item.textItem.boundingRect() for row in self.cell_texts for item in row]
        fits = all(r.width() <= box.width() / h and r.height() <= box.height() / L for r in rects)
        for row in self.cell_texts:
            for item in row:
                item.setVisible(fits)
        title = "Each head's similarity to its previous match"  # short: a plot's title sets its least width
        title += "" if fits else " (colours only)"
        if self.grid_plot.titleLabel.text != title:
            self.grid_plot.setTitle(title)

    def _grid_clicked(self, event) -> None:
        pos = event.pos()
        layer, head = int(pos.y()), int(pos.x())
        L, h = self.tm.history.detectors["previous"].shape[1:]
        if 0 <= layer < L and 0 <= head < h:
            self.on_head(layer, head)

    # --- why over the steps --------------------------------------------------------------------
    def _build_why(self) -> None:
        plot = self.why_plot.getPlotItem()
        tm = self.tm
        if tm.why is None:
            plot.setTitle(f"Why over the steps: {tm.why_error or 'no cell'}")
            return
        s = tm.why
        plot.setTitle(f"Why L{s['layer']} H{s['head']} scores key {s['col']} {s['key_token']!r} for query "
                      f"{s['row']} {s['query_token']!r}: the score's terms at every step")  # fmt: skip
        x = np.arange(len(s["steps"]), dtype=float)
        plot.addLegend(offset=(10, 10), colCount=2)
        up, down = np.zeros_like(x), np.zeros_like(x)
        terms = largest_terms(s)
        for i, (label, values) in enumerate(terms):
            pos, neg = np.clip(values, 0, None), np.clip(values, None, 0)
            colour = head_colour(i, len(terms))
            brush = pg.mkBrush(pg.mkColor(colour).lighter(130))
            for base, part in ((up, pos), (down, neg)):
                lo = pg.PlotCurveItem(x, base.copy(), pen=pg.mkPen(colour, width=0.5))
                hi = pg.PlotCurveItem(x, base + part, pen=pg.mkPen(colour, width=1))
                plot.addItem(lo)
                plot.addItem(hi)
                plot.addItem(pg.FillBetweenItem(lo, hi, brush=brush))
                base += part
            plot.legend.addItem(pg.PlotDataItem(pen=pg.mkPen(colour, width=6)), label)
        plot.plot(x, s["score"], pen=pg.mkPen("#000000", width=2.5), name="score")
        every = max(1, len(s["steps"]) // 8)
        ticks = [(i, str(st)) for i, st in enumerate(s["steps"]) if i % every == 0 or i == len(s["steps"]) - 1]
        plot.getAxis("bottom").setTicks([ticks, []])
        plot.getAxis("left").enableAutoSIPrefix(False)
        plot.setLabel("bottom", "training step (checkpoints)")
        plot.setLabel("left", f"{s['stage']} score and its terms")
        self.why_marker = pg.InfiniteLine(angle=90, pen=pg.mkPen("#000000", width=1, style=Qt.PenStyle.DashLine))
        plot.addItem(self.why_marker)

    # --- interaction ---------------------------------------------------------------------------
    @property
    def step(self) -> int:
        return self.tm.steps[self.slider.value()]

    def set_step(self, step: int) -> None:
        self.slider.setValue(self.tm.steps.index(step))

    def _moved(self, index: int) -> None:
        tm = self.tm
        sim = tm.similarity(index)
        self.image.setImage(np.nan_to_num(sim, nan=0.0), autoLevels=False)
        self.bar.setLevels((0, 1))
        follows = tm.follows(index)
        for layer, row in enumerate(self.cell_texts):
            for head, item in enumerate(row):
                was = int(follows[layer, head])
                text = f"{sim[layer, head]:.2f}" + ("" if was == head else f"\nwas H{was}")
                item.setText(text, color="#ffffff" if sim[layer, head] < 0.6 else "#000000")
        self._fit_texts()
        same = tm.history.integrity.duplicate_of(tm.steps[index])
        note = "" if same is None else f" (same weights as step {same})"
        self.step_label.setText(f"{tm.steps[index]}{note}")
        if getattr(self, "why_marker", None) is not None:
            self.why_marker.setValue(index)
        self.on_step(tm.paths[index])
        self.step_changed.emit(tm.steps[index])

    def _event_chosen(self, row: int) -> None:
        events = self.tm.history.events
        if 0 <= row < len(events):
            self.set_step(events[row].step_after)
