"""The training timeline: a step slider, the loss curves with the step marked, and every head's
previous-token and induction scores against the step (one line per head, ``L0 H1``).

Handed a :class:`~explorer.engine.timeline_data.Timeline` and two callbacks, never the main window:
``on_step(path)`` when the slider moves (the main window then traces that step's model), and
``on_head(path, layer, head)`` when a head's line is clicked (open that head at that step).
The x axis is the checkpoint's index (the steps are log-spaced), labelled with the step numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

import explorer.widgets  # noqa: F401 - pyqtgraph's text near black (explorer/widgets/__init__.py)
from explorer.engine.timeline_data import Timeline

HEAD_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
LEFT_AXIS_PX = 56  # the y axes (ticks and their title) of the three plots, one width: their x axes line up


def head_colour(index: int, count: int):
    """One colour per head of the model (L0 H1 and L1 H1 were the same colour, told apart by dashes
    only): the eight named colours, or as many hues as there are heads."""
    return HEAD_COLOURS[index] if count <= len(HEAD_COLOURS) else pg.intColor(index, hues=count)


LOSSES = (("heldout_loss", "held-out loss", "#333333"), ("heldout_repeated_loss", "on repeated blocks", "#d62728"),
          ("train_loss", "training loss", "#999999"))  # fmt: skip


def head_label(layer: int, head: int) -> str:
    return f"L{layer} H{head}"


class TimelineWindow(QWidget):
    step_changed = Signal(int)  # the step shown

    def __init__(self, timeline: Timeline, on_step: Callable[[Path], None] | None = None,
                 on_head: Callable[[Path, int, int], None] | None = None, parent: QWidget | None = None):  # fmt: skip
        super().__init__(parent, Qt.WindowType.Window)
        self.timeline = timeline
        self.on_step = on_step or (lambda path: None)
        self.on_head = on_head or (lambda path, layer, head: None)
        self.setWindowTitle(f"Training timeline: {timeline.name}")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, len(timeline.steps) - 1)
        self.slider.setPageStep(1)
        self.step_label = QLabel()
        self.step_label.setMinimumWidth(220)
        row = QHBoxLayout()
        row.addWidget(QLabel("Step"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.step_label)
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.setBackground("w")
        self.markers: list[pg.InfiniteLine] = []
        self.curves: dict[tuple[str, int, int], pg.PlotDataItem] = {}
        self._build_plots()
        column = QVBoxLayout(self)
        column.addLayout(row)
        column.addWidget(self.plots, 1)
        note = QLabel(f"Scores on: {''.join(t for t in timeline.tokens if t != '<s>')[:80]!r}. "
                      "Click a head's line to open that head at that step.")  # fmt: skip
        note.setWordWrap(True)
        column.addWidget(note)
        self.slider.valueChanged.connect(self._moved)
        self.slider.setValue(len(timeline.steps) - 1)
        self._moved(self.slider.value())

    # --- plots -----------------------------------------------------------------------------
    def _axis_ticks(self, plot: pg.PlotItem) -> None:
        steps = self.timeline.steps
        every = max(1, len(steps) // 8)
        ticks = [(i, str(s)) for i, s in enumerate(steps) if i % every == 0 or i == len(steps) - 1]
        plot.getAxis("bottom").setTicks([ticks, []])
        plot.setXRange(0, len(steps) - 1, padding=0.03)  # the same x range in every plot
        plot.setLabel("bottom", "training step (log-spaced checkpoints)")
        marker = pg.InfiniteLine(angle=90, pen=pg.mkPen("#000000", width=1, style=Qt.PenStyle.DashLine))
        plot.addItem(marker)
        self.markers.append(marker)

    def _build_plots(self) -> None:
        t = self.timeline
        loss = self.plots.addPlot(row=0, col=0, title="Loss")
        loss.addLegend(offset=(10, -10))  # bottom left: the curves start high
        for key, name, colour in LOSSES:
            x, y = t.loss_series(key)
            if len(x):
                loss.plot(x, y, pen=pg.mkPen(colour, width=2 if "heldout" in key else 1), name=name)
        loss.setLabel("left", "nats per character")
        self._axis_ticks(loss)
        for i, score in enumerate(("previous", "induction")):
            plot = self.plots.addPlot(row=i + 1, col=0, title=f"{score.capitalize()}-token score per head"
                                      if score == "previous" else "Induction score per head")  # fmt: skip
            plot.addLegend(offset=(10, 10), colCount=t.num_layers)
            plot.setYRange(0, 1)
            plot.setLabel("left", score)
            values = t.scores[score]  # (S, L, h)
            if np.isnan(values).all():  # e.g. no character repeats: the induction score is undefined
                plot.setTitle(f"{plot.titleLabel.text} (undefined on this sentence: no token repeats)")
                self._axis_ticks(plot)
                continue
            for layer in range(t.num_layers):
                for head in range(t.num_heads):
                    colour = head_colour(layer * t.num_heads + head, t.num_layers * t.num_heads)
                    style = Qt.PenStyle.SolidLine if layer == 0 else Qt.PenStyle.DashLine
                    pen = pg.mkPen(colour, width=2, style=style)
                    # lines without symbols: 24 curves of symbols doubled the cost of each repaint
                    # as the step marker moves (the x axis ticks mark the checkpoints)
                    curve = plot.plot(range(len(t.steps)), values[:, layer, head], pen=pen,
                                      name=head_label(layer, head))  # fmt: skip
                    curve.setCurveClickable(True, width=8)
                    curve.sigClicked.connect(lambda _c, _e=None, lh=(layer, head): self._head_clicked(*lh))
                    self.curves[(score, layer, head)] = curve
            self._axis_ticks(plot)
        for plot in (loss, *(self.plots.getItem(row, 0) for row in (1, 2))):
            # one width for every left axis: the loss plot's x axis started 10 px right of the scores'
            plot.getAxis("left").setWidth(LEFT_AXIS_PX)

    # --- interaction -----------------------------------------------------------------------
    @property
    def step(self) -> int:
        return self.timeline.steps[self.slider.value()]

    def set_step(self, step: int) -> None:
        self.slider.setValue(self.timeline.index_of(step))

    def _moved(self, index: int) -> None:
        t = self.timeline
        for marker in self.markers:
            marker.setValue(index)
        best = t.scores["induction"][index].max()
        prev = t.scores["previous"][index].max()
        self.step_label.setText(f"{t.steps[index]}  (best previous {prev:.2f}, induction {best:.2f})")
        self.on_step(t.paths[index])
        self.step_changed.emit(t.steps[index])

    def _head_clicked(self, layer: int, head: int) -> None:
        self.on_head(self.timeline.paths[self.slider.value()], layer, head)
