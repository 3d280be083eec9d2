"""The "Why" panel beside the inspector: a clicked score split into query-source × key-source terms.

The split (models.reads.why) runs off the GUI thread through the window's read jobs, as the inspector's
derivation does; the panel draws the answer: a heatmap of the table T[a, b] (signed colours, the
colour bar labelled), each query source's total on the right margin and each key source's on the top,
the largest terms in words, and "why this key and not the others" for the row. A click on a cell
whose query (or key) source is a head (``L0 H2``) asks to open that head's attention row at the
query (or key) position: :attr:`WhyPanel.open_head` (layer, head, position).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontMetricsF
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.heads import array_head
from explorer.widgets.colormaps import colour_map
from explorer.widgets.labels import display_label
from models.config import InputError
from models.reads.why import for_and_against, why, words

WHY_STAGES = ("scores", "scaled", "biased", "softcapped", "masked", "weights", "weighted_norms")
MOST = 24  # query sources shown; the rest are summed into one "others" row (the table still adds up)
MOST_KEYS = 14  # key sources shown (their names run along the bottom), the rest as one "others" column
PROMPT = "Click a cell of a score or weight stage: its score is split here into what wrote the query × the key."
NUMBERED = 64  # cells: up to this many, each term is written in its cell
HEAD = re.compile(r"^L(\d+) H(\d+)$")
GAP_PX = 6  # between two column labels on one line
EDGE_PX = 40  # how far the first and last column's labels may reach past the table


def fold(names: list[str], table: np.ndarray, axis: int, most: int = MOST) -> tuple[list[str], np.ndarray]:
    """Keep the ``most`` sources with the largest total |terms| along ``axis``; sum the rest as "others"."""
    if len(names) <= most:
        return names, table
    weight = np.abs(table).sum(axis=1 - axis)
    keep = np.sort(np.argsort(-weight)[: most - 1])
    rest = np.setdiff1d(np.arange(len(names)), keep)
    take = np.take(table, keep, axis=axis)
    others = np.take(table, rest, axis=axis).sum(axis=axis, keepdims=True)
    return [names[i] for i in keep] + [f"{len(rest)} others"], np.concatenate([take, others], axis=axis)


def staggered_lines(widths: list[float], pitch: float, most: int = 4) -> int:
    """How many lines labels of these widths, one per column ``pitch`` px apart, need so that two on
    the same line never touch (every ``lines``-th label shares a line); at most ``most``."""
    for lines in range(1, most):
        if all((a + b) / 2 + GAP_PX <= lines * pitch for a, b in zip(widths, widths[lines:])):
            return lines
    return most


def stagger(label: str, line: int, side: str) -> str:
    """``label`` moved ``line`` lines away from the table (below it for the bottom axis, above for the top)."""
    return "\n" * line + label if side == "bottom" else label + "\n" * line


class WhyPanel(QWidget):
    # layer, head, position, side ("query" or "key"): open that head's attention row there
    open_head = Signal(int, int, int, str)

    def __init__(self, parent: QWidget | None = None, jobs=None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self.result: dict | None = None
        self.rows: list[str] = []
        self.margins: tuple[list[str], list[str]] = ([], [])  # the totals written in the right and top margins
        self.cols: list[str] = []
        self.note = QLabel(PROMPT)
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)  # a refusal may quote a token
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.PlainText)  # a token <s> is itself, not a strike-through
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.setBackground("w")
        self.plot = self.plots.addPlot(row=0, col=0)
        self.plot.invertY(True)
        self.plot.setMouseEnabled(False, False)
        self.plot.hideButtons()
        self.plot.setMenuEnabled(False)
        small = QFont()
        small.setPointSize(8)
        self.small = QFontMetricsF(small)
        for side in ("top", "right", "bottom"):
            self.plot.showAxis(side)
            self.plot.getAxis(side).setStyle(tickFont=small)
        for side in ("top", "bottom"):  # the first and last column's label may reach past the table's edge
            self.plot.getAxis(side).setStyle(hideOverlappingLabels=EDGE_PX)
        self.column_labels: tuple[list[str], list[str]] = ([], [])  # (names, totals) of the key columns
        self.plot.vb.sigResized.connect(self._label_columns)
        self.plot.vb.sigResized.connect(self._fit_numbers)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.numbers: list[pg.TextItem] = []  # each term written in its cell, when the table is small
        self.colour_bar = pg.ColorBarItem(values=(-1, 1), colorMap=colour_map(False), interactive=False, width=12,
                                          label="term T[a, b] = scale · q_i^a · k_j^b")  # fmt: skip
        self.colour_bar.setImageItem(self.image, insert_in=self.plot)
        self.plot.setLabel("left", "query source a")
        self.plot.setLabel("bottom", "key source b")
        self.plots.scene().sigMouseClicked.connect(self._clicked)
        self.words = QLabel()
        self.words.setWordWrap(True)
        self.words.setTextFormat(Qt.TextFormat.PlainText)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.title)
        layout.addWidget(self.plots, 1)
        layout.addWidget(self.words)
        self.plots.hide()
        self.words.hide()

    # --- asking ----------------------------------------------------------------------------------
    def show_cell(self, display, stage, head: int, row: int, col: int, model: Callable[[], object] | None) -> None:
        """Split ``display``'s score of query head ``head`` at (``row``, ``col``); ``model()`` gives the
        loaded pretrained model that made the trace (None for the toy, whose ``display.params`` serve)."""
        if display is None or stage is None or stage.name not in WHY_STAGES or not stage.per_head:
            return self._say(PROMPT)
        request = display.request
        if getattr(request, "edits", ()) or getattr(request, "difference", False):
            return self._say("The split explains the model's own numbers: undo the what-if edits to see it.")
        trace, params = display.trace, display.params
        source = getattr(request, "sentence", None)  # an encoder-decoder's source (its decoder reads it)
        head = array_head(stage, head)

        def compute():
            try:
                return why(trace, head, row, col, params=params, model=model() if model else None, with_row=True,
                           source=source)
            except InputError as exc:
                return str(exc)

        self._say(f"Splitting head {head}'s score at query {row}, key {col}…")
        if self.jobs is None:
            return self.show_result(compute())
        self.jobs.ask("why", compute, self.show_result)

    def clear(self) -> None:
        if self.jobs is not None:
            self.jobs.cancel("why")
        self.result = None
        self._say(PROMPT)

    # --- drawing ---------------------------------------------------------------------------------
    def show_result(self, result) -> None:
        if isinstance(result, str):  # a one-line refusal
            return self._say(result)
        self.result = result
        table = np.asarray(result["table"])
        self.rows, table = fold(result["query_sources"], table, 0)
        self.cols, table = fold(result["key_sources"], table, 1, MOST_KEYS)
        peak = float(np.abs(table).max()) or 1.0
        self.image.setImage(table.astype(np.float32), autoLevels=False)
        self.image.setRect(0, 0, table.shape[1], table.shape[0])
        self.colour_bar.setLevels((-peak, peak))
        left = [(i + 0.5, name) for i, name in enumerate(self.rows)]
        right = [(i + 0.5, f"{t:+.3g}") for i, t in enumerate(table.sum(1))]
        totals = [f"{t:+.2g}" for t in table.sum(0)]
        self.margins = ([label for _p, label in right], totals)  # (query totals, key totals)
        for side, ticks in (("left", left), ("right", right)):
            self.plot.getAxis(side).setTicks([ticks])
        self.column_labels = (list(self.cols), totals)
        self._label_columns()
        self._write_numbers(table)
        self.plot.setRange(xRange=(0, table.shape[1]), yRange=(0, table.shape[0]), padding=0)
        where = f"layer {result['layer']} " if result.get("layer") is not None else ""
        self.title.setText(f"{where}head {result['head']}: {result['stage']} at query {result['row']} "
                           f"'{display_label(result['query_token'])}', key {result['col']} "
                           f"'{display_label(result['key_token'])}' = "
                           f"{result['score']:.4g}. Right margin: each query source's total; top: each key "
                           "source's total.")  # fmt: skip
        lines = [f"{result['stage']} = {result['score']:.5g} = the sum of these {len(result['query_sources'])} × "
                 f"{len(result['key_sources'])} terms (relative error {result['relative_error']:.1e}). Largest:"]
        lines += [f"• {w}" for w in words(result, 4)]
        split = result.get("row_split")
        if result.get("row_note"):
            lines.append(f"The row is not split: {result['row_note']}")
        if split is not None:
            pro, con = for_and_against(split, 2)
            lines.append(f"Why key {split['top_key']} {split['top_token']!r} and not the others: its score is "
                         f"{split['margin']:+.4g} above the weighted mean.")  # fmt: skip
            for heading, entries in (("For it", pro), ("Against it", con)):
                if entries:
                    lines.append(f"{heading}:")
                    lines += [f"• {w}" for w in words(split, entries=entries)]
        if any(HEAD.match(n) for n in self.rows + self.cols):
            lines.append("Click a cell whose source is a head (L0 H2) to open that head's attention row.")
        self.words.setText("\n".join(lines))
        self.note.hide()
        for widget in (self.title, self.plots, self.words):
            widget.show()

    def _label_columns(self) -> None:
        """Each key column's name below and total above, on as many staggered lines as they need to
        stand apart at the columns' width now: 14 columns in 580 px dropped names and overprinted
        totals ("+0.081+0.0054+0.055")."""
        names, totals = self.column_labels
        if not names:
            return
        pitch = self.plot.vb.width() / len(names)
        for side, labels in (("bottom", names), ("top", totals)):
            lines = staggered_lines([self.small.horizontalAdvance(t) for t in labels], pitch)
            ticks = [(j + 0.5, stagger(label, j % lines, side)) for j, label in enumerate(labels)]
            axis = self.plot.getAxis(side)
            axis.setTicks([ticks])
            # The room the lines need (pyqtgraph measures a label of several lines at 0.8 of its height):
            room = int(np.ceil(lines * self.small.lineSpacing())) + 2
            if axis.style["tickTextHeight"] != room or axis.style["autoExpandTextSpace"]:
                axis.setStyle(tickTextHeight=room, autoExpandTextSpace=False, autoReduceTextSpace=False)

    def _write_numbers(self, table: np.ndarray) -> None:
        for item in self.numbers:
            self.plot.removeItem(item)
        self.numbers = []
        if table.size > NUMBERED:
            return
        peak = float(np.abs(table).max()) or 1.0
        for (a, b), value in np.ndenumerate(table):
            colour = (255, 255, 255) if abs(value) > 0.6 * peak else (25, 25, 25)  # legible on dark cells
            item = pg.TextItem(f"{value:+.3g}", color=colour, anchor=(0.5, 0.5))  # 3 digits, as every cell
            item.setPos(b + 0.5, a + 0.5)
            self.plot.addItem(item)
            self.numbers.append(item)
        self._fit_numbers()

    def _fit_numbers(self) -> None:
        """The terms' numbers only when every one fits its cell at the table's size now, else none (issue 44
        point 6): a 7 × 7 table in a 560 px dock overprinted "+0.0065-0.00304-0.00765"."""
        if not self.numbers:
            return
        rows, cols = self.image.image.shape if self.image.image is not None else (1, 1)
        cell_w, cell_h = self.plot.vb.width() / cols, self.plot.vb.height() / rows
        widest = max(item.textItem.boundingRect().width() for item in self.numbers)
        tall = max(item.textItem.boundingRect().height() for item in self.numbers)
        fits = widest + 4 <= cell_w and tall <= cell_h + 4  # a text item's box holds ~4 px of margin
        for item in self.numbers:
            item.setVisible(fits)

    def _say(self, text: str) -> None:
        for widget in (self.title, self.plots, self.words):
            widget.hide()
        self.note.setText(text)
        self.note.show()

    def _clicked(self, event) -> None:
        if self.result is None:
            return
        point = self.plot.vb.mapSceneToView(event.scenePos())
        a, b = int(np.floor(point.y())), int(np.floor(point.x()))
        if not (0 <= a < len(self.rows) and 0 <= b < len(self.cols)):
            return
        self.open_source(self.rows[a], self.cols[b])

    def open_source(self, query_source: str, key_source: str) -> bool:
        """Open the head behind the query source (at the query row), else the key source's (at the key)."""
        sides = (("query", query_source, self.result["row"]), ("key", key_source, self.result["col"]))
        for side, name, position in sides:
            found = HEAD.match(name)
            if found:
                self.open_head.emit(int(found.group(1)), int(found.group(2)), int(position), side)
                return True
        return False
