"""The positional-encoding lens: P's columns over positions, P Pᵀ, and the relative-position rotation.

Three panels, as in the study notes: some columns of ``P`` as curves over the positions (later
columns have longer periods), ``P Pᵀ`` as a heatmap (nearby positions are similar), and for an
offset δ chosen in a spin box the check ``R(δ ω_j) · P[i] = P[i+δ]`` for every frequency pair j,
with the largest error printed. The maths is in models/reads/pe_lens.py; this widget only draws.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from explorer.widgets.colormaps import colour_map
from models.reads import pe_lens

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
        controls.addWidget(QLabel("offset δ"))
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
        self.curves = self.plots.addPlot(row=0, col=0, colspan=2)
        self.curves.addLegend(offset=(-10, 10), labelTextColor=(30, 30, 30))
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
        self.pairs = self.plots.addPlot(row=1, col=1)
        self.pairs.setLabel("bottom", "frequency pair j")
        self.pairs.setLabel("left", "max |R(δω_j)·P[i] − P[i+δ]|")
        self.error_bars = pg.BarGraphItem(x=[], height=[], width=0.8, brush=pg.mkBrush(31, 119, 180))
        self.pairs.addItem(self.error_bars)
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
        self.curves.clear()
        self.curves.legend.clear()
        for k, c in enumerate(columns if columns is not None else pe_lens.default_columns(d)):
            pen = pg.mkPen(LINE_COLOURS[k % len(LINE_COLOURS)], width=2)
            self.curves.plot(np.arange(n), self.p[:, c], pen=pen, name=f"column {c}")
        self.curves.setTitle(f"Columns of P over {n} positions (d = {d})", size="10pt")
        sim = pe_lens.similarity(self.p)
        low, high = float(sim.min()), float(sim.max())
        self.image.setImage(sim.astype(np.float32), autoLevels=False)
        self.colour_bar.setLevels((low, high if high > low else low + 1.0))
        self.similar.setTitle("P Pᵀ: nearby positions are similar", size="10pt")
        self.delta.blockSignals(True)
        self.delta.setRange(-(n - 1), n - 1)
        self.delta.setValue(min(max(self.delta.value() or 1, -(n - 1)), n - 1))
        self.delta.blockSignals(False)
        self._on_delta(self.delta.value())

    def set_delta(self, delta: int) -> None:
        """Choose the offset δ (clamped to ±(n − 1)); redraws and emits ``delta_changed``."""
        if self.delta.value() == delta:
            self._on_delta(delta)
        else:
            self.delta.setValue(delta)

    def largest_error(self) -> float:
        return self.check.largest if self.check is not None else 0.0

    # --- drawing ---------------------------------------------------------------------------------
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
