"""The positional-encoding lens: P's columns over positions, P Pᵀ, and the relative-position rotation.

Three panels, as in the study notes: some columns of ``P`` as curves over the positions (later
columns have longer periods), ``P Pᵀ`` as a heatmap (nearby positions are similar), and for an
offset δ chosen in a spin box the check ``R(δ ω_j) · P[i] = P[i+δ]`` for every frequency pair j,
with the largest error printed. The maths is in models/reads/pe_lens.py; this widget only draws.

A loaded model's own positions (models/reads/model_positions.py) replace the notes' illustration:
``set_model_positions`` draws a rotary model's angle i·θ_j per pair over the sentence's positions
and its θ_j (each kind of layer's, side by side), or a position table's rows (learned, or Marian's
fixed sinusoids) and the cosine similarity between positions; the legend sits in a column of
its own, beside the curves rather than on them.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from explorer.widgets.colormaps import colour_map
from models.reads import pe_lens
from models.reads.model_positions import ModelPositions, cosine, shown_pairs

LINE_COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75)]


class PeLens(QWidget):
    """``set_encoding(n, d)`` shows the sinusoidal encoding of ``n`` positions and ``d`` columns."""

    delta_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.n = self.d = 0
        self.p: np.ndarray | None = None
        self.check: pe_lens.RelativeCheck | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        controls = QHBoxLayout()
        self.delta_label = QLabel("offset δ")
        controls.addWidget(self.delta_label)
        self.delta = QSpinBox()
        self.delta.setToolTip("Compare each position i with position i + δ")
        self.delta.valueChanged.connect(self._on_delta)
        controls.addWidget(self.delta)
        self.error = QLabel()
        controls.addWidget(self.error, 1)
        layout.addLayout(controls)
        self.about = QLabel()  # whether the shown run uses this encoding (explorer.actions.other_windows)
        self.about.setWordWrap(True)
        self.about.setStyleSheet("font-weight: bold;")
        layout.addWidget(self.about)
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.setBackground("w")
        layout.addWidget(self.plots, 1)
        layout.addStretch(0)  # with the plots hidden (T5's buckets), the sentence stays at the top
        self.curves = self.plots.addPlot(row=0, col=0, colspan=2)
        self.legend = pg.LegendItem(labelTextColor=(30, 30, 30))  # its own column: never on the curves
        beside = self.plots.addLayout(row=0, col=2)  # the legend at the top of its column, its rows packed
        beside.addItem(self.legend, row=0, col=0)
        beside.layout.setRowStretchFactor(1, 1)
        beside.addLabel("", row=1, col=0)
        self.shown: dict[str, np.ndarray] = {}  # what the curves and the heatmap plot (tests compare)
        self.controls = [self.delta_label, self.delta, self.error]
        self.curves.setLabel("bottom", "position i")
        self.similar = self.plots.addPlot(row=1, col=0)
        self.similar.invertY(True)
        self.similar.setAspectLocked(True)
        self.similar.setLabel("bottom", "position j")
        self.similar.setLabel("left", "position i")
        self.image = pg.ImageItem(axisOrder="row-major")
        self.similar.addItem(self.image)
        self.colour_bar = pg.ColorBarItem(colorMap=colour_map(True), interactive=False, width=12)
        self.colour_bar.setImageItem(self.image, insert_in=self.similar)
        self.pairs = self.plots.addPlot(row=1, col=1, colspan=2)
        self.pairs.setLabel("bottom", "frequency pair j")
        self.pairs.setLabel("left", "max |R(δω_j)·P[i] − P[i+δ]|")
        self.error_bars = pg.BarGraphItem(x=[], height=[], width=0.8, brush=pg.mkBrush(31, 119, 180))
        self.pairs.addItem(self.error_bars)
        self.frequency_bars: list[pg.BarGraphItem] = []  # a rotary model's θ_j, one series per kind of layer
        for plot in (self.curves, self.similar, self.pairs):
            plot.hideButtons()
            plot.setMenuEnabled(False)

    # --- public ----------------------------------------------------------------------------------
    def set_about(self, text: str) -> None:
        self.about.setText(text)
        self.about.setVisible(bool(text))

    def set_encoding(self, n: int, d: int, columns: list[int] | None = None) -> None:
        """Show the encoding of ``n`` positions with ``d`` columns (the notes: n = 60, d = 32)."""
        self.n, self.d = n, d
        self.p = pe_lens.encoding(n, d)  # (n, d) float32, as the engine stores it
        self._show_plots(True, checks=True)
        chosen = columns if columns is not None else pe_lens.default_columns(d, n)
        self._draw_curves({f"column {c}": self.p[:, c] for c in chosen})
        self.curves.setLabel("left", "P[i, column]")
        self.curves.setTitle(f"Columns of P over {n} positions (d = {d})", size="10pt")
        self._draw_heatmap(pe_lens.similarity(self.p), "P Pᵀ: nearby positions are similar")
        self.delta.blockSignals(True)
        self.delta.setRange(-(n - 1), n - 1)
        self.delta.setValue(min(max(self.delta.value() or 1, -(n - 1)), n - 1))
        self.delta.blockSignals(False)
        self._on_delta(self.delta.value())

    def set_model_positions(self, mp: ModelPositions, name: str) -> None:
        """A loaded model's own positions (no δ check: it is the notes' sinusoids' property)."""
        self.p, self.check, self.n = None, None, mp.n
        self._show_plots(mp.rows is not None or mp.angles is not None, checks=False)
        if mp.kind == "rotary":
            pairs = shown_pairs(len(mp.inv_freq))
            self._draw_curves({f"pair {j} (θ = {mp.inv_freq[j]:.3g})": mp.angles[:, j] for j in pairs})
            self.curves.setLabel("left", "angle i·θ_j (rad, wrapped to ±π)")
            self.curves.setTitle(f"{name}: the rotation of pair j at each of the {mp.n} positions", size="10pt")
            self._draw_heatmap(np.cos(mp.angles), f"cos(i·θ_j): position i × pair j (of {len(mp.inv_freq)})",
                               columns="frequency pair j")  # fmt: skip
            self._draw_frequencies(mp.tables or {"": mp.inv_freq})
        elif mp.kind in ("learned", "sinusoidal"):
            d = mp.rows.shape[1]
            dims = shown_pairs(d, 4)
            self._draw_curves({f"dim {c}": mp.rows[:, c] for c in dims})
            self.curves.setLabel("left", "position row value")
            self.curves.setTitle(f"{name}: {mp.kind} position rows {mp.first_row}…{mp.first_row + mp.n - 1}, "
                                 f"a few of {d} dims", size="10pt")  # fmt: skip
            self._draw_heatmap(cosine(mp.rows), "cosine similarity between positions' rows")
            self.pairs.setVisible(False)

    def set_delta(self, delta: int) -> None:
        """Choose the offset δ (clamped to ±(n − 1)); redraws and emits ``delta_changed``."""
        if self.delta.value() == delta:
            self._on_delta(delta)
        else:
            self.delta.setValue(delta)

    def largest_error(self) -> float:
        return self.check.largest if self.check is not None else 0.0

    # --- drawing ---------------------------------------------------------------------------------
    def _show_plots(self, plots: bool, checks: bool) -> None:
        self.plots.setVisible(plots)
        for item in self.frequency_bars:
            self.pairs.removeItem(item)
        self.frequency_bars = []
        self.pairs.setVisible(checks)
        for widget in self.controls:
            widget.setVisible(checks)
        self.pairs.setLabel("bottom", "frequency pair j")
        self.pairs.setLabel("left", "max |R(δω_j)·P[i] − P[i+δ]|")
        self.similar.setLabel("bottom", "position j")

    def _draw_curves(self, lines: dict[str, np.ndarray]) -> None:
        self.curves.clear()
        self.legend.clear()
        self.shown = dict(lines)
        for k, (name, values) in enumerate(lines.items()):
            pen = pg.mkPen(LINE_COLOURS[k % len(LINE_COLOURS)], width=2)
            joined = np.append(np.abs(np.diff(values)) < np.pi, False)  # a wrapped angle's jump is not drawn
            self.legend.addItem(self.curves.plot(np.arange(len(values)), values, pen=pen, connect=joined), name)

    def _draw_frequencies(self, tables: dict[str, np.ndarray]) -> None:
        """θ_j per pair as bars, side by side for each kind of layer (Gemma 3's sliding and full)."""
        for item in self.frequency_bars:
            self.pairs.removeItem(item)
        width = 0.8 / len(tables)
        self.frequency_bars = []
        for k, theta in enumerate(tables.values()):
            x = np.arange(len(theta)) + (k - (len(tables) - 1) / 2) * width
            bars = pg.BarGraphItem(x=x, height=theta, width=width, brush=pg.mkBrush(LINE_COLOURS[k % 6]))
            self.pairs.addItem(bars)
            self.frequency_bars.append(bars)
        self.error_bars.setOpts(x=[], height=[])
        self.pairs.setVisible(True)
        self.pairs.setLabel("left", "θ_j (rad per position)")
        named = zip(tables, ("blue", "orange", "green"))  # LINE_COLOURS' first
        kinds = ", ".join(f"{kind.split('_')[0]} {colour}" for kind, colour in named) if len(tables) > 1 else ""
        self.pairs.setTitle(f"θ_j per pair: {kinds}" if kinds else "The model's frequencies θ_j", size="10pt")
        self.pairs.enableAutoRange()

    def _draw_heatmap(self, values: np.ndarray, title: str, columns: str = "position j") -> None:
        self.shown["heatmap"] = values
        low, high = float(values.min()), float(values.max())
        self.image.setImage(values.astype(np.float32), autoLevels=False)
        self.image.setRect(QRectF(-0.5, -0.5, values.shape[1], values.shape[0]))  # cell j centred on tick j
        self.colour_bar.setLevels((low, high if high > low else low + 1.0))
        self.similar.setAspectLocked(values.shape[0] == values.shape[1])
        self.similar.setLabel("bottom", columns)
        self.similar.setTitle(title, size="10pt")

    def _on_delta(self, delta: int) -> None:
        if self.p is None:
            return
        self.check = check = pe_lens.relative_check(self.p, delta)
        pairs = len(check.errors)
        self.error_bars.setOpts(x=np.arange(pairs), height=check.errors, width=0.8)
        self.pairs.setTitle(f"R(δ)·P[i] = P[i+δ] for δ = {delta}, per pair", size="10pt")
        if check.positions == 0:
            self.error.setText(f"δ = {delta}: no position i has a partner i + δ among the {self.n}")
        else:
            worst = check.worst_pair
            self.error.setText(
                f"largest error over {check.positions} positions and {pairs} pairs: {check.largest:.2e} "
                f"(pair j = {worst}, turned by δ·ω_j = {check.angles[worst]:.4g} rad)"
            )
        self.delta_changed.emit(delta)
