"""Numbers in the cells: each cell's exact value written on it when the cells are big enough.

One :class:`NumbersItem` per heatmap paints all its texts in one go (no item per cell), in device
pixels, so the font stays the same size at any zoom. :class:`CellNumbers` decides when to show them
(cells at least :data:`MIN_CELL_PX` on screen, at most :data:`MAX_CELLS` visible per plot), takes the
visible cells' values from the view's ``values`` (explorer.widgets.stage_rows: rows the read jobs
read off the GUI thread; the rows not there yet are asked for, and written when they come) and picks
black or white text from the colour of each cell's uint8 index in the lookup table. Updated on
refresh, resize and zoom (debounced).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF
from PySide6.QtWidgets import QCheckBox, QGraphicsItem

from explorer.widgets.colormaps import lookup_table
from explorer.widgets.frames import debounced

MIN_CELL_PX = (16.0, 12.0)  # width, height of a cell on screen below which nothing can be written
ZOOM_IN = "zoom in"  # what the Numbers box says while they are hidden; its tooltip says why
# Three significant digits, or nothing: BART's weights read "0.1 0.2 0.7" and a T5 score "3" for 3.141
# when digits were dropped to fit, and a 7 px font wrote digits ~5 px high (docs/window.md promises 3).
DIGITS = (3,)
MAX_CELLS = 400  # visible cells per plot above which nothing is written
MAX_FONT_PX = 12.0
MIN_FONT_PX = 10.0  # the smallest font the numbers are written in (digits ~7 px high)
CANDIDATE_PX = 3.0  # texts this much narrower than the widest at one size may be the widest at a smaller one
CHOICES = [(MIN_FONT_PX, d) for d in DIGITS]  # (smallest font, digits), tried in turn
LIGHT_LUMA = 140.0  # above this the cell is light: black text, else white
BLACK, WHITE = QColor(0, 0, 0), QColor(255, 255, 255)


def cell_text(value: float, digits: int = 3) -> str:
    """A cell's value in ``digits`` significant digits, with a real minus sign and a short exponent
    (``9.82e−5``); −∞ for masked scores."""
    if value != value:  # math, not numpy: a cell of a MiniLM sentence's 1,200 is written per update
        return "NaN"
    if math.isinf(value):
        return "−∞" if value < 0 else "∞"
    text = f"{value:.{digits}g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text.replace("-", "−")


def parse_cell_text(text: str) -> float:
    """The float a :func:`cell_text` stands for (tests)."""
    return float(text.replace("−∞", "-inf").replace("∞", "inf").replace("−", "-"))


def is_light(lut: np.ndarray, index: int) -> bool:
    r, g, b = (float(v) for v in lut[index][:3])
    return 0.299 * r + 0.587 * g + 0.114 * b > LIGHT_LUMA


def text_colour(lut: np.ndarray, index: int) -> QColor:
    """Black on a light cell, white on a dark one."""
    return BLACK if is_light(lut, index) else WHITE


def text_colours(lut: np.ndarray, indices: np.ndarray) -> list[QColor]:
    """:func:`text_colour` of each index (flattened), the table's lightness computed once."""
    r, g, b = (lut[:, c].astype(float) for c in range(3))
    light = 0.299 * r + 0.587 * g + 0.114 * b > LIGHT_LUMA  # as is_light, in its order
    return [BLACK if lit else WHITE for lit in light[np.asarray(indices).ravel()].tolist()]


def likely_widest(values: np.ndarray) -> list[float]:
    """A few of ``values`` whose texts are likely among the widest (the smallest magnitude: most
    leading zeros or an exponent; the most negative; the largest magnitude): no text of all can
    be narrower than the widest of these, so where these do not fit, nothing does."""
    flat = np.asarray(values, dtype=float).ravel()
    if flat.size == 0:
        return []
    size = np.abs(np.where(np.isfinite(flat), flat, 0.0))
    nonzero = np.where(size > 0, size, np.inf)
    picks = {int(np.argmin(nonzero)), int(np.argmin(np.where(np.isnan(flat), np.inf, flat))), int(np.argmax(size))}
    return [float(flat[k]) for k in sorted(picks)]


class NumbersItem(QGraphicsItem):
    """All the numbers of one plot, in the view's cell coordinates (row, col = y, x)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[int, int, str, QColor]] = []  # row, col, text, colour
        self.shows: tuple = ()  # (generation, stage name, head) the cells are the numbers of
        self._rect = QRectF()
        self.font = QFont()
        self.setZValue(5)  # above the image, under the row marker and the selection outline
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresParentOpacity)

    def set_cells(self, cells: list[tuple[int, int, str, QColor]], font_px: float) -> None:
        self.prepareGeometryChange()
        self.cells = cells
        self.font.setPixelSize(max(1, round(font_px)))
        if cells:
            rows = [c[0] for c in cells]
            cols = [c[1] for c in cells]
            self._rect = QRectF(min(cols), min(rows), max(cols) - min(cols) + 1, max(rows) - min(rows) + 1)
        else:
            self._rect = QRectF()
        self.update()

    def texts(self) -> dict[tuple[int, int], str]:
        """(row, col) → the text written there (tests)."""
        return {(r, c): text for r, c, text, _ in self.cells}

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        return self._rect

    def paint(self, painter, _option, _widget=None) -> None:
        if not self.cells:
            return
        transform = painter.transform()
        painter.save()
        painter.resetTransform()  # draw in device pixels: the text keeps its size at any zoom
        painter.setFont(self.font)
        for row, col, text, colour in self.cells:
            painter.setPen(colour)
            painter.drawText(transform.mapRect(QRectF(col, row, 1, 1)), Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()


class CellNumbers:
    """Keeps a :class:`NumbersItem` on every plot of a MatrixView up to date, with its toggle."""

    def __init__(self, view) -> None:
        self.view = view
        self.items: dict[int, NumbersItem] = {}  # id(HeatmapPlot) → its item
        self.checkbox = QCheckBox("Numbers")
        self.checkbox.setChecked(True)
        self.checkbox.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.hidden_because = ""  # why the numbers are not shown now ("" when shown or unticked)
        # As wide as its longest text from the start: a box that changed width would re-lay out the
        # view, resize the heatmaps and change whether the numbers fit (the two would take turns).
        self.checkbox.setText(f"Numbers ({ZOOM_IN})")
        self.checkbox.setFixedWidth(self.checkbox.sizeHint().width())
        self._say_why("")
        self.checkbox.toggled.connect(lambda _on: self.update())
        view.add_control(self.checkbox)
        self._soon = debounced(self.update, "numbers pause", view)  # once a zoom or resize pauses

    @property
    def enabled(self) -> bool:
        return self.checkbox.isChecked()

    def schedule(self, *_) -> None:
        self._soon()

    def item_for(self, plot) -> NumbersItem:
        item = self.items.get(id(plot))
        if item is None:
            item = NumbersItem()
            box = plot.plot.getViewBox()
            box.addItem(item, ignoreBounds=True)
            box.sigRangeChanged.connect(self.schedule)
            box.sigResized.connect(self.schedule)
            self.items[id(plot)] = item
        return item

    def _say_why(self, reason: str) -> None:
        """The Numbers box says why the numbers are hidden ("zoom in"), and its tooltip the rule."""
        self.hidden_because = reason
        self.checkbox.setText(f"Numbers ({ZOOM_IN})" if reason else "Numbers")
        self.checkbox.setToolTip(
            "Write each cell's value on it (3 significant digits) when "
            f"every number fits its cell and at most {MAX_CELLS} cells are visible"
            + (f". Hidden now: {reason}; zoom in." if reason else ""))  # fmt: skip

    def update(self) -> None:
        self._soon.cancel()
        view, stage = self.view, self.view.state.stepper.stage
        display = view.state.display
        image = display.images.get(stage.name) if display is not None and stage is not None else None
        reasons, wanted, visible = [], [], []
        for plot in view.plots:
            item = self.item_for(plot)
            shows = (view.state.stepper.generation, stage.name, plot.head) if stage is not None else ()
            if self.enabled and image is not None and plot.rows == len(stage.row_labels):
                found, reason = self._visible_values(plot, stage)
                reasons.append(reason)
                if isinstance(found, tuple) and isinstance(found[0], str):  # rows still to be read: asked below
                    wanted.append(found)
                    if item.shows != shows:  # the numbers of another stage or run: never left on this one
                        item.set_cells([], MAX_FONT_PX)
                    continue
                if found:
                    visible.append((plot, item, shows, found))
                    continue
            item.set_cells([], MAX_FONT_PX)
            item.shows = shows
        # One choice of digits and font for every plot whose numbers fit at all: two heads side by side
        # never read 3 digits in a 7 px font beside 1 digit in 12 px, and a head whose cells are too
        # narrow for any number (not zoomed in as far) does not hide the others' numbers.
        sizes, texts = self.fitted_sizes([found for *_, found in visible])  # each choice's font for each plot, once
        visible = [(*v[:3], v[3] if any(row[k] for row in sizes) else None) for k, v in enumerate(visible)]
        if any(found is None for *_, found in visible):
            reasons.append("the numbers are wider than the cells")
        fits = [k for k, (*_, found) in enumerate(visible) if found is not None]
        choice = next(((digits, min(row[k] for k in fits)) for (_, digits), row in zip(CHOICES, sizes)
                       if fits and all(row[k] for k in fits)), None)  # fmt: skip
        lut = lookup_table(image.sequential) if image is not None else None
        for k, (plot, item, shows, found) in enumerate(visible):
            cells: list = []
            if choice is not None and found is not None:
                digits, font_px = choice
                r0, r1, c0, c1, *_ = found
                written = iter(zip(texts[k, digits], text_colours(lut, self._indices(plot, r0, r1, c0, c1))))
                cells = [(r, c, *next(written)) for r in range(r0, r1) for c in range(c0, c1)]  # as measured
            item.set_cells(cells, font_px if cells else MAX_FONT_PX)
            item.shows = shows
        self._say_why(next((r for r in reasons if r), ""))
        if wanted and view.values.request("numbers", wanted, self.update):
            self.update()  # no read jobs: read in this turn

    def _visible_values(self, plot, stage) -> tuple[tuple | None, str]:
        """The visible cells' values and sizes ``(r0, r1, c0, c1, values, cell_w, cell_h)``, or None and
        why not; or, when the visible rows have not been read yet, what to ask for (stage, head, r0, r1)."""
        box = plot.plot.getViewBox()
        px_w, px_h = box.viewPixelSize()  # view units (cells) per screen pixel
        if px_w <= 0 or px_h <= 0:
            return None, ""
        cell_w, cell_h = 1.0 / px_w, 1.0 / px_h
        if cell_w < MIN_CELL_PX[0] or cell_h < MIN_CELL_PX[1]:
            return None, "the cells are too small"
        (x0, x1), (y0, y1) = box.viewRange()
        r0, r1 = max(0, math.floor(y0)), min(plot.rows, math.ceil(y1))
        c0, c1 = max(0, math.floor(x0)), min(plot.cols, math.ceil(x1))
        if r1 <= r0 or c1 <= c0:
            return None, ""
        if (r1 - r0) * (c1 - c0) > MAX_CELLS:
            return None, f"over {MAX_CELLS} cells in view"
        rows = self.view.values.rows(stage.name, plot.head, r0, r1)
        if rows is None:
            return (stage.name, plot.head, r0, r1), ""
        return (r0, r1, c0, c1, rows[:, c0:c1], cell_w, cell_h), ""

    @classmethod
    def fitted_sizes(cls, found: list[tuple]) -> tuple[list[list[float]], dict[tuple[int, int], list[str]]]:
        """For each choice of CHOICES in turn, the font size (px) at which each plot's visible numbers fit their
        cells, 0 where they do not; and the texts written (plot, digits) → each visible cell's text, row
        by row, for the plots that fit. The digits and font shown are those of the first choice at which
        every plot whose numbers fit at all fits, at the smallest size any of them needs (update); each
        plot's texts are written and measured once, not once for it and once for all (a 12-head first
        fill took 20 ms in one turn), and only where a few of its likely widest fit (likely_widest:
        a MiniLM sentence's cells, wide enough to try and too narrow for any number, wrote every value
        three times for nothing). It stops at the first choice where every plot fits."""
        texts: dict[tuple[int, int], list[str]] = {}
        unique: dict[tuple[int, int], set[str]] = {}
        widest: dict[int, list[float]] = {}  # each plot's likely_widest, for every number of digits
        table = []
        for smallest, digits in CHOICES:
            row = []
            for k, (*_, values, cell_w, cell_h) in enumerate(found):
                if (k, digits) not in unique:
                    if k not in widest:
                        widest[k] = likely_widest(values)
                    tried = {cell_text(v, digits) for v in widest[k]}
                    if not cls._font_px(tried, cell_w, cell_h, MIN_FONT_PX):  # not even at the smallest font
                        unique[k, digits] = set()
                    else:
                        texts[k, digits] = [cell_text(v, digits) for v in values.ravel().tolist()]
                        unique[k, digits] = set(texts[k, digits])
                row.append(cls._font_px(unique[k, digits], cell_w, cell_h, smallest))
            table.append(row)
            if all(row):  # every plot fits here: no later choice is shown
                break
        return table, texts

    @staticmethod
    def _indices(plot, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """The uint8 colour index painted at each visible cell's centre (the image may be
        subsampled, or a zoomed region: its rectangle is in cell units)."""
        image = plot.image.image
        rect = plot.image.mapRectToParent(plot.image.boundingRect())
        h, w = image.shape[:2]
        rows = ((np.arange(r0, r1) + 0.5 - rect.y()) * h / max(rect.height(), 1e-9)).astype(int).clip(0, h - 1)
        cols = ((np.arange(c0, c1) + 0.5 - rect.x()) * w / max(rect.width(), 1e-9)).astype(int).clip(0, w - 1)
        return image[np.ix_(rows, cols)]

    @staticmethod
    def _font_px(unique: set[str], cell_w: float, cell_h: float, smallest: float = MIN_FONT_PX) -> float:
        """The largest whole pixel size (up to MAX_FONT_PX) at which the widest of the texts ``unique``,
        measured in that font, fits its cell with 2 px either side; 0 when none from MIN_FONT_PX up does.

        Every text is measured at the first size only; a smaller font keeps their order but for rounding,
        so at the next sizes only those within CANDIDATE_PX of the widest can be the widest."""
        size = math.floor(min(MAX_FONT_PX, cell_h * 0.75))
        if size < smallest or not unique:
            return 0.0
        widths = {t: text_advance(size, t) for t in unique}
        widest = max(widths.values())
        candidates = [t for t, w in widths.items() if w >= widest - CANDIDATE_PX]
        while size >= smallest:
            if widest <= cell_w - 4:
                return float(size)
            size -= 1
            widest = max(text_advance(size, t) for t in candidates)
        return 0.0


@functools.lru_cache(maxsize=16)
def _metrics(size: int) -> QFontMetricsF:
    font = QFont()  # the font NumbersItem writes with
    font.setPixelSize(size)
    return QFontMetricsF(font)


@functools.lru_cache(maxsize=8192)
def text_advance(size: int, text: str) -> float:
    """The width of ``text`` written in the numbers' font at ``size`` px (measured once: every
    update of every head measures the same few texts at the same few sizes)."""
    return _metrics(size).horizontalAdvance(text)
