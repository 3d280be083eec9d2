"""An axis that labels matrix cells with token strings: all of them when they fit, else evenly spaced
with their position.

Ticks sit at cell centres (i + 0.5). Instead of a fixed ``setTicks`` list, the labels are
chosen from the visible range and the axis length on every layout, so resizing or zooming
into a 2048-token matrix shows as many labels as fit and never draws thousands of strings:

- every label in view when they fit (measured with the axis font);
- below a matrix, labels too wide to stand side by side are turned upright (read bottom to top),
  so each cell a line tall still gets its label;
- a label stacked on another (the rows' labels, upright ones) needs the font's line height, measured,
  not a fixed pitch: 14 upright labels in a 205 px plot all fit;
- otherwise every k-th label (k = 1, 2, 5, 10, 20, ...) with its position: ``812 the``, never the
  same word repeated without one.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QGuiApplication
from PySide6.QtWidgets import QGraphicsItem

from explorer.widgets.colormaps import TEXT_RGB
from explorer.widgets.labels import display_label

MAX_LABEL_CHARS = 12
LINE_RGB = (90, 90, 90)
POSITIONS_ABOVE = 30  # a vertical axis with more labels than this keeps room for their positions
LABEL_GAP_PX = 6  # horizontal space between two labels
EDGE_OVERHANG_PX = 14
NICE_STEPS = (1, 2, 5)


def shorten(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def nice_step(minimum: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is at least ``minimum``: labels then sit
    at round positions and do not jump around while the window is resized."""
    scale = 1
    while True:
        for s in NICE_STEPS:
            if s * scale >= minimum:
                return s * scale
        scale *= 10


AXIS_TITLES = {"query": "query i", "key": "key j", "token": "token", "feature": "feature"}


def axis_title(axis: str, cross: bool = False) -> str:
    """What an axis of a stage is: ``query i``, ``key j`` (which sentence, for cross-attention)."""
    title = AXIS_TITLES.get(axis, axis)
    if cross and axis == "query":
        return title + " (2nd sentence)"
    if cross and axis == "key":
        return title + " (1st sentence)"
    return title


def all_fit(first: int, last: int, cell_px: float, widths: list[float]) -> bool:
    """True when the centred labels of cells ``first..last`` stand side by side without overlapping."""
    return all((widths[i] + widths[i + 1]) / 2 + LABEL_GAP_PX <= cell_px for i in range(first, last))


def set_axis_title(axis: pg.AxisItem, title: str) -> None:
    """``axis``'s title (pyqtgraph's ``setLabel``), only when it changes: pyqtgraph lays the axis out
    and draws it again even for the same text, which on every result cost a redrawn axis."""
    shown = axis.label.isVisibleTo(axis)  # (not isVisible(): false for an axis not on screen yet)
    if axis.labelText != title or shown != bool(title):  # "" hides the title
        axis.setLabel(title)


TALLEST_PX = 2160  # the tallest axis when no screen says (offscreen without one)
MEASURED_LABELS = 512  # beyond this many tokens, label widths are bounded, not measured one by one
SHARED_PICTURES = 64  # drawn axes kept for axes drawn the same (all heads of a grid share their labels)
_pictures: OrderedDict[tuple, object] = OrderedDict()


MEASURED_KEPT = 8  # label sets kept shown and measured (every head of a grid has the same tokens)
_measured: OrderedDict[tuple, tuple[tuple[str, ...], list[float]]] = OrderedDict()


def shown_and_widths(labels: tuple[str, ...], font: QFont, metrics: QFontMetricsF) -> tuple[tuple, list[float]]:
    """What each label draws (characters no font covers as code points) and its shortened width in
    ``font``: measured once for all axes with these labels (a 12-head grid's 24 axes share them)."""
    key = (labels, font.key())
    if key in _measured:
        _measured.move_to_end(key)
        return _measured[key]
    shown = tuple(display_label(s, font) for s in labels)
    if len(shown) <= MEASURED_LABELS:
        widths = [metrics.horizontalAdvance(shorten(s)) for s in shown]
    else:  # thousands of tokens: measuring each (~3 µs) would stall a paint; a bound per length
        per_char = metrics.horizontalAdvance("W")
        widths = [per_char * len(shorten(s)) for s in shown]
    _measured[key] = (shown, widths)
    while len(_measured) > MEASURED_KEPT:
        _measured.popitem(last=False)
    return shown, widths


def clear_shared_pictures() -> None:
    """Forget every shared axis drawing: each axis draws its own again when it next paints."""
    _pictures.clear()


class TokenAxis(pg.AxisItem):
    def __init__(self, orientation: str, **kwargs):
        super().__init__(orientation, **kwargs)
        # No units, so no SI prefix (explorer.widgets turns it off in every axis): otherwise every range
        # change (each layout) re-renders the axis label's HTML, ~30 times per plot while a grid is laid out.
        if not self.vertical:  # let the first and last token's label reach a little past the matrix
            self.setStyle(hideOverlappingLabels=EDGE_OVERHANG_PX)
        self._labels: tuple[str, ...] = ()
        self._shown: tuple[str, ...] = ()
        self._positioned = False  # labels carry their position (thinned)
        self._upright = False  # labels below the matrix turned upright (too wide side by side)
        self.setTextPen(QColor(*TEXT_RGB))
        self.setPen(QColor(*LINE_RGB))
        self._widths: list[float] = []  # pixel width of each shortened label (shown_and_widths)
        self._title = ""  # the axis title set_title shows ("" none)
        self._metrics: tuple[object, QFontMetricsF] | None = None  # (the tick font, its metrics)
        self._chosen: tuple[tuple, range] | None = None  # _choose's last question and answer
        self._drawable: tuple[tuple, float] | None = None  # ((labels, font), _drawn_width's answer)
        # Kept as a pixmap in device pixels: a repaint of the heatmaps (a new result with the same
        # labels) copies it rather than laying out and drawing every label again (QPicture.play).
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)

    @property
    def labels(self) -> tuple[str, ...]:
        """The token label of each cell, as given to set_labels (before shortening)."""
        return self._labels

    @property
    def title(self) -> str:
        """The axis title shown ("" none)."""
        return self._title

    @property
    def vertical(self) -> bool:
        return self.orientation in ("left", "right")

    def set_labels(self, labels: tuple[str, ...]) -> None:
        if labels == self._labels:
            return
        self._labels = tuple(labels)
        # What is drawn: characters no installed font covers become code points (U+4E2D), never boxes.
        self._shown, self._widths = shown_and_widths(self._labels, self.style["tickFont"] or QFont(),
                                                     self._font_metrics())  # fmt: skip
        if self.vertical:  # as wide as the labels from the start, rather than grown while painting
            self.setWidth(self.label_room())
        else:
            self._decide()
        self.picture = None  # pyqtgraph caches the drawn axis; labels changed, so redraw
        self.update()

    def _font_metrics(self) -> QFontMetricsF:
        """The tick font's metrics, measured once per font (asked for on every layout of the axis)."""
        font = self.style["tickFont"]
        if self._metrics is None or self._metrics[0] is not font:
            self._metrics = (font, QFontMetricsF(font or QFont()))
        return self._metrics[1]

    def _label_widths(self) -> list[float]:
        """The pixel width of each shortened label (measured in set_labels, shared by axes alike)."""
        return self._widths

    def _pitch(self) -> float:
        """Pixels one stacked label needs: the font's line height (a row label's height, an upright
        label's width), measured with the axis font."""
        return self._font_metrics().height()

    def _position_px(self) -> float:
        """The width of the widest position prefix (``"2047 "``)."""
        return self._font_metrics().horizontalAdvance(f"{max(0, len(self._labels) - 1)} ")

    def label_room(self) -> int:
        """Pixels the longest label (its position too, when many) and the title need: a grid reserves it."""
        room = self._drawn_width()
        if room is None:
            positions = self._position_px() if len(self._labels) > POSITIONS_ABOVE else 0
            room = max(self._label_widths(), default=0) + positions
        title = self.label.boundingRect().height() if self._title else 0
        return int(room + title) + self.style["tickTextOffset"][0] + 10

    def _drawn_width(self) -> float | None:
        """Row labels of a long input (beyond MEASURED_LABELS; their widths only bounded, "W" × 12 and the
        position, ~100-200 px blank before the maps): the widest label drawn at any height up to the
        tallest screen's, measured. Thinned labels sit at multiples of a nice step no smaller than that
        screen allows: of it or of the next two (any larger nice step is a multiple of one of them).
        Whatever the height: a width that followed it re-laid out the grid and restarted the picture."""
        n = len(self._labels)
        if not self.vertical or n <= MEASURED_LABELS:
            return None
        if self._drawable is None or self._drawable[0] != (self._labels, self.style["tickFont"]):
            tallest = max((screen.geometry().height() for screen in QGuiApplication.screens()), default=0)
            steps = [nice_step(max(1, math.ceil(self._pitch() * n / (tallest or TALLEST_PX))))]
            steps += [nice_step(steps[0] + 1), nice_step(nice_step(steps[0] + 1) + 1)]
            advance = self._font_metrics().horizontalAdvance
            width = max(advance(f"{i} {shorten(self._shown[i])}") for k in steps for i in range(0, n, k))
            self._drawable = ((self._labels, self.style["tickFont"]), width)
        return self._drawable[1]

    def set_title(self, title: str) -> None:
        """The axis title (``query i``, ``key j``), in the label colour; "" hides it."""
        if title == self._title:  # (not the label's isVisible(): false for an axis not on screen yet)
            return
        self._title = title
        if title:
            self.setLabel(title, color=QColor(*TEXT_RGB))
        else:
            self.showLabel(False)
        if self.vertical and self._labels:
            self.setWidth(self.label_room())
        self.picture = None
        self.update()

    def paint(self, p, opt, widget):
        """pyqtgraph draws each axis into a QPicture once per change of labels, range or size,
        ~2 ms of Python each: the grid's heads share their token labels, so an axis drawn exactly
        like one already drawn (same labels, range, size and style) replays that picture. On a
        12-head model this took a paint from ~50 to ~25 ms."""
        if self.picture is None:
            self._decide()
            key = self._picture_key()
            if key in _pictures:
                _pictures.move_to_end(key)
                self.picture = _pictures[key]
            else:
                super().paint(p, opt, widget)  # draws self.picture and plays it
                _pictures[key] = self.picture
                while len(_pictures) > SHARED_PICTURES:
                    _pictures.popitem(last=False)
                return
        self.picture.play(p)

    def _picture_key(self) -> tuple:
        """Everything the drawing depends on (pyqtgraph's AxisItem.generateDrawSpecs)."""
        style = tuple((k, v.key() if isinstance(v, QFont) else repr(v)) for k, v in sorted(self.style.items()))
        pens = tuple((pen.color().rgba(), pen.widthF(), pen.style()) for pen in (self.pen(), self.textPen(),
                                                                                self.tickPen()))  # fmt: skip
        size = self.size()
        return (self.orientation, self._shown, tuple(self.range), size.width(), size.height(), style, pens,
                self._upright, self._positioned,
                self.label.isVisible() and self.labelText, self.grid, self._tickLevels is None)  # fmt: skip

    def _choose(self, minVal: float, maxVal: float, size: float) -> range:  # noqa: N803
        """The cells labelled in view; sets whether labels are thinned (with positions) and upright."""
        question = (minVal, maxVal, size, self._labels, self.style["tickFont"])
        if self._chosen is not None and all(a is b or a == b for a, b in zip(self._chosen[0], question)):
            return self._chosen[1]  # asked again on every range and size event of a layout: same answer
        kept = self._choose_now(minVal, maxVal, size)
        self._chosen = (question, kept)
        return kept

    def _choose_now(self, minVal: float, maxVal: float, size: float) -> range:  # noqa: N803
        n = len(self._labels)
        minVal, maxVal = sorted((minVal, maxVal))  # noqa: N806 - an inverted axis passes them swapped
        if n == 0 or size <= 0 or maxVal <= minVal:
            return range(0)
        first = max(0, math.floor(minVal))
        last = min(n - 1, math.ceil(maxVal) - 1)
        if last < first:
            return range(0)
        cell_px = size / (maxVal - minVal)
        upright = not self.vertical and not all_fit(first, last, cell_px, self._label_widths())
        pitch = self._pitch()
        thin = (self.vertical or upright) and cell_px < pitch
        step = nice_step(math.ceil(pitch / cell_px)) if thin else 1
        self._positioned = step > 1  # thinned: each label says where it is
        self._set_upright(upright, step > 1)
        return range(math.ceil(first / step) * step, last + 1, step)

    def _decide(self) -> None:
        """Choose labels for the current range and length before drawing (pictures are shared
        between axes drawn alike, so an axis replaying another's picture decides too)."""
        if not hasattr(self, "_widths"):  # pyqtgraph resizes the axis while it is being built
            return
        size = self.size()
        self._choose(*self.range, size.height() if self.vertical else size.width())

    def tickValues(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803 - pyqtgraph API
        kept = self._choose(minVal, maxVal, size)
        return [(1.0, [i + 0.5 for i in kept])] if len(kept) else []

    def label_text(self, i: int) -> str:
        """What is drawn for cell ``i``: the (shortened) token, with its position when thinned."""
        text = shorten(self._shown[i])
        return f"{i} {text}" if self._positioned else text

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        n = len(self._labels)
        return [self.label_text(int(v)) if 0 <= int(v) < n else "" for v in values]

    def setRange(self, mn: float, mx: float):  # noqa: N802 - pyqtgraph API
        super().setRange(mn, mx)
        self._decide_size()

    def resizeEvent(self, ev=None):  # noqa: N802 - Qt API
        super().resizeEvent(ev)
        self._decide_size()

    def _decide_size(self) -> None:
        """Labels below a matrix decide before the paint whether they stand upright: an axis that
        grows then changes the layout, not a paint under way. Row labels never change the axis's
        size (set_labels sets their width): they decide when drawn, not on each of a layout's
        many range and size events (~300 for a first 12-head grid)."""
        if not self.vertical:
            self._decide()

    def drawn_labels(self) -> list[tuple[QRectF, str]]:
        """Each label drawn now and the rectangle it covers, in the axis's own pixels (tests)."""
        size = self.size()
        length = size.height() if self.vertical else size.width()
        low, high = self.range
        values = [v for level in self.tickValues(low, high, length) for v in level[1]]
        metrics = self._font_metrics()
        out = []
        for v, text in zip(values, self.tickStrings(values, 1.0, 1.0)):
            along = (v - min(low, high)) * length / abs(high - low)
            if self.vertical:
                along = length - along if low < high else along  # an inverted view: row 0 at the top
                out.append((QRectF(0, along - metrics.height() / 2, metrics.horizontalAdvance(text), metrics.height()),
                            text))  # fmt: skip
            elif self._upright:
                x = self._upright_centre(along)
                out.append((QRectF(x - metrics.height() / 2, 0, metrics.height(), metrics.horizontalAdvance(text)),
                            text))  # fmt: skip
            else:
                width = metrics.horizontalAdvance(text)
                out.append((QRectF(along - width / 2, 0, width, metrics.height()), text))
        return out

    # --- upright labels below the matrix ---------------------------------------------------
    def _set_upright(self, upright: bool, positioned: bool) -> None:
        """Upright labels need the longest one's width below the matrix (with its position when
        thinned, never kept empty otherwise): the axis grows to it."""
        if self.vertical:
            return
        position = self._position_px() if positioned else 0.0
        wanted = (max(self._label_widths(), default=0) + position + 4) if upright else self._pitch()
        if upright != self._upright or abs(self.textHeight - wanted) > 1:
            self._upright = upright
            self.textHeight = int(math.ceil(wanted))
            self._updateHeight()

    def _updateMaxTextSize(self, x):  # noqa: N802 - pyqtgraph API
        """pyqtgraph sizes a bottom axis to its labels' height as it draws them side by side; upright
        labels' room is their length (_set_upright), which that measure would shrink back to one line
        in every paint of new labels: the grid laid out again, and the room given back in the next."""
        if not self._upright:
            super()._updateMaxTextSize(x)

    def _upright_centre(self, x: float) -> float:
        """Where an upright label at ``x`` is drawn: at its tick, or moved in just enough that all of it
        is inside what the axis may draw (its edge overhang: 3 px beside a neighbouring matrix), never
        half cut off at the first or last cell."""
        clip, half = self.boundingRect(), self._pitch() / 2
        return min(max(x, clip.left() + half), clip.right() - half)

    def generateDrawSpecs(self, p):  # noqa: N802 - pyqtgraph API
        specs = super().generateDrawSpecs(p)
        if not self._upright or specs is None:
            return specs
        axis_spec, tick_specs, _text_specs = specs
        bounds = self.mapRectFromParent(self.geometry())
        low, high = self.range
        if high == low:
            return axis_spec, tick_specs, []
        ticks = self.tickValues(low, high, bounds.width())
        values = ticks[0][1] if ticks else []
        top = bounds.top() + max(0, self.style["tickLength"]) + self.style["tickTextOffset"][1]
        length = bounds.bottom() - top
        texts = []
        for v, text in zip(values, self.tickStrings(values, 1.0, 1.0)):
            x = self._upright_centre(bounds.left() + (v - low) * bounds.width() / (high - low))
            texts.append((QPointF(x, top), length, text))
        return axis_spec, tick_specs, texts

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):  # noqa: N802, N803 - pyqtgraph API
        if not self._upright:
            return super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
        super().drawPicture(p, axisSpec, tickSpecs, [])
        p.setPen(self.textPen())
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        half = self._pitch() / 2
        for anchor, length, text in textSpecs:  # each read bottom to top, ending at its tick
            p.save()
            p.translate(anchor)
            p.rotate(-90)
            p.drawText(QRectF(-length, -half, length, 2 * half),
                       int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), text)  # fmt: skip
            p.restore()
