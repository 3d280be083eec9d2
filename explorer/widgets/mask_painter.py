"""Paint a custom mask: a query × key grid where a click toggles a cell and a drag paints.

True = hidden, as ``--mask custom --mask-file M.npy`` takes it. Start from none, causal or
padding (the pad positions given with :meth:`MaskPainter.set_tokens`). Open and Save read and
write a boolean ``.npy`` through callables the window hands in (``models.cli.export.load_matrix`` and
``models.files.export.write_array``): widgets do not import the maths, and so get the same checks and
the same atomic save as the command line. Its status line follows a :class:`~explorer.panes.MaskPane`
(the state's ``mask_painter``, handed in by the dock): the widget only draws it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainterPath, QPen
from PySide6.QtWidgets import QFileDialog, QGraphicsPathItem, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from explorer.panes import MaskPane
from explorer.widgets.colormaps import CELL_BORDER_RGB, mask_cell_colours
from explorer.widgets.frames import Ticker
from explorer.widgets.token_axis import TokenAxis, axis_title
from models.engine.mask_rule import hidden_array

STARTS = ("none", "causal", "padding")
MAX_CELL_ASPECT = 2.0  # a cell at most twice as wide as tall (or tall as wide): a grid, not stripes
QWIDGETSIZE_MAX = (1 << 24) - 1  # Qt's "no maximum"
BORDER_FROM_PX = 5  # cell borders drawn while cells are at least this many pixels a side


class _Grid(pg.ImageItem):
    """The mask as an image in cell units; clicks and drags go to the painter."""

    def __init__(self, painter: MaskPainter):
        super().__init__(axisOrder="row-major")
        self.painter = painter
        self._paint_value = True
        self._last: tuple[int, int] | None = None

    def _cell(self, pos) -> tuple[int, int] | None:
        row, col = int(np.floor(pos.y())), int(np.floor(pos.x()))
        n_q, n_k = self.painter.shape
        return (row, col) if 0 <= row < n_q and 0 <= col < n_k else None

    def mouseClickEvent(self, ev) -> None:  # noqa: N802 (pyqtgraph's name)
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        cell = self._cell(ev.pos())
        if cell is not None:
            ev.accept()
            self.painter.toggle(*cell)

    def mouseDragEvent(self, ev) -> None:  # noqa: N802
        if ev.button() != Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        ev.accept()
        if ev.isStart():
            start = self._cell(ev.buttonDownPos())
            if start is None:
                return
            self._paint_value = not self.painter.mask()[start]  # the first cell's new state
            self._last = start
            self.painter.paint([start], self._paint_value)
        cell = self._cell(ev.pos())
        if cell is not None and self._last is not None:
            self.painter.paint(_line(self._last, cell), self._paint_value)
            self._last = cell
        if ev.isFinish():
            self._last = None


def _line(a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
    """The cells from a to b, so that a fast drag leaves no gaps."""
    steps = max(abs(b[0] - a[0]), abs(b[1] - a[1]), 1)
    return list(dict.fromkeys((round(a[0] + (b[0] - a[0]) * t / steps), round(a[1] + (b[1] - a[1]) * t / steps))
                              for t in range(steps + 1)))  # fmt: skip


class MaskPainter(QWidget):
    mask_changed = Signal(object)  # (n_q, n_k) bool, True = hidden
    error = Signal(str)  # a file could not be opened or saved (the mask is unchanged)

    def __init__(self, load_array: Callable[[str], np.ndarray] | None = None,
                 save_array: Callable[[np.ndarray, str], object] | None = None,
                 parent: QWidget | None = None, pane: MaskPane | None = None) -> None:  # fmt: skip
        super().__init__(parent)
        self.pane = pane if pane is not None else MaskPane()  # the state's, from the main window's dock
        self._load, self._save = load_array, save_array
        self._mask = np.zeros((0, 0), bool)
        self._pads: tuple[int, ...] = ()
        self.left, self.bottom = TokenAxis("left"), TokenAxis("bottom")
        self.view = pg.PlotWidget(axisItems={"left": self.left, "bottom": self.bottom}, enableMenu=False,
                                  background="w")  # the labels are dark: on black they could not be read
        self.plot = self.view.getPlotItem()
        self.plot.invertY(True)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(False, False)  # drags paint; they never pan
        self.plot.getViewBox().setDefaultPadding(0.0)
        self.left.set_title(axis_title("query"))  # as every heatmap: "query i", "key j", near black
        self.bottom.set_title(axis_title("key"))
        visible, hidden = mask_cell_colours()
        self._lut = np.array([(*visible, 255), (*hidden, 255)], dtype=np.uint8)  # index 0: visible, 1: hidden
        self.grid = _Grid(self)
        self.plot.addItem(self.grid)
        self.borders = QGraphicsPathItem()  # thin lines between cells, so one sees there are cells to click
        pen = QPen(QColor(*CELL_BORDER_RGB), 1)
        pen.setCosmetic(True)
        self.borders.setPen(pen)
        self.borders.setZValue(5)
        self.plot.addItem(self.borders)
        self.plot.getViewBox().sigResized.connect(self._fit_cells)
        self._fit_width = QWIDGETSIZE_MAX  # the plot's width that fits its grid (_fit_cells)
        self._narrow = Ticker(self, lambda: self.view.setMaximumWidth(self._fit_width), single_shot=True)
        self.buttons = {}
        row = QHBoxLayout()
        row.addWidget(QLabel("Start from:"))
        for kind in STARTS:
            b = self.buttons[kind] = QPushButton(kind)
            b.setToolTip(f"Replace the painted mask with the {kind} mask")
            b.clicked.connect(lambda _=False, k=kind: self.start_from(k))
            row.addWidget(b)
        row.addStretch(1)
        for name, slot in (("Open…", self._ask_open), ("Save…", self._ask_save)):
            b = self.buttons[name] = QPushButton(name)
            b.clicked.connect(slot)
            row.addWidget(b)
        self.buttons["Open…"].setEnabled(load_array is not None)
        self.buttons["Save…"].setEnabled(save_array is not None)
        self.status = QLabel(self.pane.status)  # follows the pane's status (set_status)
        self.status.setWordWrap(True)
        self.pane.status_changed.connect(self._show_status)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        # Left-aligned: a grid narrower than the dock keeps its plot (axis line, "key j") to its width.
        layout.addWidget(self.view, 1, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.status)

    def _show_status(self, text: str) -> None:
        self.status.setText(text)

    # --- the mask ------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return self._mask.shape

    def mask(self) -> np.ndarray:
        """A copy of the painted mask, ``(n_q, n_k)`` bool, True = hidden."""
        return self._mask.copy()

    def set_tokens(self, query_tokens, key_tokens, pads: tuple[int, ...] = ()) -> None:
        """The grid's axes; the mask is kept when its shape still fits, else starts from none."""
        self._pads = tuple(p for p in pads if 0 <= p < len(key_tokens))
        self.left.set_labels(tuple(query_tokens))
        self.bottom.set_labels(tuple(key_tokens))
        shape = (len(query_tokens), len(key_tokens))
        if self._mask.shape != shape:
            self._set(np.zeros(shape, bool), resize=True)

    def set_mask(self, mask: np.ndarray) -> None:
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != self._mask.shape:
            raise ValueError(f"expected a {self._mask.shape} bool mask, got {mask.shape} {mask.dtype}")
        self._set(mask.copy())

    def start_from(self, kind: str) -> None:
        n_q, n_k = self._mask.shape
        pads = self._pads if kind == "padding" else ()
        self._set(hidden_array(n_q, n_k, causal=kind == "causal", pads=pads))

    def toggle(self, row: int, col: int) -> None:
        self.paint([(row, col)], not self._mask[row, col])

    def paint(self, cells, value: bool) -> None:
        mask = self._mask.copy()
        for cell in cells:
            mask[cell] = value
        if not np.array_equal(mask, self._mask):
            self._set(mask)

    def _set(self, mask: np.ndarray, resize: bool = False) -> None:
        self._mask = mask
        n_q, n_k = mask.shape
        if mask.size:
            self.grid.setImage(mask.astype(np.uint8), autoLevels=False, levels=(0, 1), lut=self._lut)
        else:
            self.grid.clear()
        if resize:
            self.grid.setRect(QRectF(0, 0, max(1, n_k), max(1, n_q)))
            path = QPainterPath()
            for col in range(n_k + 1):
                path.moveTo(col, 0)
                path.lineTo(col, n_q)
            for row in range(n_q + 1):
                path.moveTo(0, row)
                path.lineTo(n_k, row)
            self.borders.setPath(path)
            self._fit_cells()
        self.pane.set_status(f"{int(mask.sum())} of {mask.size} pairs hidden (grey cells, as in every heatmap)")
        self.mask_changed.emit(mask.copy())

    def _fit_cells(self) -> None:
        """Show the whole grid with cells at most MAX_CELL_ASPECT times wider than tall (or taller
        than wide): in a wide dock the grid keeps to the left (beside its row labels) and the rest
        stays empty, rather than 6 cells stretched into 1,400 px. Borders only while cells are big
        enough for them not to cover the cells."""
        n_q, n_k = self._mask.shape
        box = self.plot.getViewBox()
        width, height = box.width(), box.height()
        if not n_q or not n_k or width <= 0 or height <= 0:
            box.setRange(xRange=(0, max(1, n_k)), yRange=(0, max(1, n_q)), padding=0)
            return
        cell_w, cell_h = width / n_k, height / n_q
        span_x = width / min(cell_w, MAX_CELL_ASPECT * cell_h)  # cells across the view: n_k or more
        span_y = height / min(cell_h, MAX_CELL_ASPECT * cell_w)
        box.setRange(xRange=(0, span_x), yRange=(0, span_y), padding=0)
        self.borders.setVisible(min(width / span_x, height / span_y) >= BORDER_FROM_PX)
        # The plot as wide as its grid at the most the dock's width allows (its key axis line and
        # title then span the grid, not the whole dock); a wider or taller dock resizes it and asks again.
        around = self.view.width() - width  # the row labels, axis and margins beside the cells
        cell = min((self.width() - around) / n_k, MAX_CELL_ASPECT * height / n_q)
        fit = int(math.ceil(around + n_k * cell)) + 1
        self._fit_width = fit if fit < self.width() else QWIDGETSIZE_MAX
        self._narrow.start()  # in a turn of its own: not while the view is still being resized

    # --- files ---------------------------------------------------------------------------------
    def open_file(self, path: str) -> bool:
        """Load a boolean ``.npy`` of the grid's shape; on a bad file say why and change nothing."""
        try:
            loaded = np.asarray(self._load(path))
        except Exception as exc:  # the injected loader's one-line error (models.config.InputError)
            return self._fail(str(exc))
        if loaded.dtype != bool:
            return self._fail(f"mask file {path} must hold booleans, got {loaded.dtype}")
        if loaded.shape != self._mask.shape:
            return self._fail(f"mask file {path} has shape {loaded.shape}, expected {self._mask.shape}")
        self._set(loaded.copy())
        return True

    def save_file(self, path: str) -> bool:
        try:
            self._save(self.mask(), path)
        except Exception as exc:
            return self._fail(str(exc))
        self.pane.set_status(f"saved {path}")
        return True

    def _fail(self, message: str) -> bool:
        self.pane.set_status(message)
        self.error.emit(message)
        return False

    def _ask_open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open mask", "", "Boolean mask (*.npy)")
        if path:
            self.open_file(path)

    def _ask_save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save mask", "mask.npy", "Boolean mask (*.npy)")
        if path:
            self.save_file(path)
