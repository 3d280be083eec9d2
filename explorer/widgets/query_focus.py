"""The attention of one word, fitted to the stage on screen: on a query × key stage the focused
query's weights over the keys as a bar chart; on a per-token stage (embeddings, Q, K, V) the
selected row's vector over its feature indices; on the outputs that vector and its decomposition
as the weighted sum of the value rows, o_i = Σ_j a_ij v_j (top contributors + result).

Its numbers (the query's weights, o_i, a row's vector) are read off the GUI thread by the window's
read jobs (explorer.jobs) and kept for the run on screen: going back to a query is instant, and the
panel shows the focus it had until the numbers of the new one come."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QLabel, QSizePolicy, QVBoxLayout, QWidget

from explorer.heads import array_head, head_name
from explorer.widgets.colormaps import sign_colours
from explorer.widgets.labels import display_label, rich_safe
from explorer.widgets.token_axis import TEXT_RGB, TokenAxis, set_axis_title, shorten
from explorer.widgets.value_axis import ValueAxis
from models.engine.pixels import enlarge_peaks, reduce_row
from models.engine.trace import AttentionTrace, query_row

TOP_CONTRIBUTORS = 5
OUTPUT_STAGES = frozenset({"head_output", "concat", "output"})  # a vector that is Σ_j a_ij v_j
MAX_BARS = 512  # more keys than this: one bar per block of keys, its largest weight
VECTOR_PREVIEW = 8  # values of o_i written out; the tooltip has all of them
BAR_BRUSH = (68, 1, 84)  # viridis' dark end, as the weights heatmap
PROMPT = "Click a row of the weights (or any query × key matrix) to focus on that word."
KEPT_ANSWERS = 64  # focus answers kept for the run on screen


def read_focus(trace, stage, head: int, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The numbers the panel shows (on the read thread): the query's weights ``(n_k,)`` and head
    output ``(d_v,)``, and on a per-token ``stage`` the row's vector (else None)."""
    weights, output = query_row(trace, head, row)
    if stage is None or stage.col_axis != "feature":
        return weights, output, None
    r = min(row, stage.shape[-2] - 1)
    h = array_head(stage, head) if stage.per_head else 0
    return weights, output, np.asarray(stage.rows(h, r, r + 1)[0], dtype=np.float32)


def _num(x: float) -> str:
    return f"{x:.4f}" if abs(x) >= 1e-4 or x == 0 else f"{x:.2e}"


def contributions_html(tokens: tuple[str, ...], weights: np.ndarray, output: np.ndarray, values: str = "",
                       n_values: int | None = None, difference: bool = False) -> str:  # fmt: skip
    """The largest weights of one query and the vector they produce, as a small HTML table.
    ``values`` names whose value rows v_j are mixed (a GQA model's shared key/value head);
    columns from ``n_values`` on have no value row (a learned attention sink's). With ``difference``
    the numbers are edited − original: the largest changes first, and no claim that Δo_i is
    Σ_j Δa_ij v_j (the values may have changed too)."""
    order = -np.abs(weights) if difference else -weights
    top = np.argsort(order, kind="stable")[:TOP_CONTRIBUTORS]
    n_values = len(weights) if n_values is None else n_values
    rows = "".join(
        f"<tr><td align=right>{_num(weights[j])}</td>"
        + ("<td>&nbsp;</td>" if difference else
           f"<td>&nbsp;×&nbsp;v<sub>{j}</sub></td>" if j < n_values else "<td>&nbsp;(no value)</td>")
        + f"<td><b>{rich_safe(shorten(display_label(tokens[j]), 16))}</b></td></tr>"
        for j in top
    )
    rest = len(weights) - len(top)
    if rest > 0:
        rows += f"<tr><td align=right>{_num(float(weights.sum() - weights[top].sum()))}</td>"
        rows += f"<td colspan=2>&nbsp;in the other {rest} keys</td></tr>"
    preview = ", ".join(f"{v:.3f}" for v in output[:VECTOR_PREVIEW])
    more = ", …" if len(output) > VECTOR_PREVIEW else ""
    source = f" (v<sub>j</sub>: {rich_safe(values)})" if values else ""
    total = float(weights.sum())
    total = 0.0 if abs(total) < 5e-5 else total  # never "−0.0000"
    if difference:
        head, d = "<b>Δa<sub>ij</sub></b> = edited − original, largest changes first:", "Δ"
    else:
        head, d = (f"<b>o<sub>i</sub> = Σ<sub>j</sub> a<sub>ij</sub> v<sub>j</sub></b>{source}, "
                   "largest weights first:", "")  # fmt: skip
    return (
        f"{head}<table cellspacing=0 cellpadding=1>{rows}</table>"
        # No-break spaces inside each term (explorer/widgets/formula_text.py): the line wraps at a comma.
        f"<p>{d}o<sub>i</sub>&nbsp;= [{preview}{more}] &nbsp;(d_v&nbsp;=&nbsp;{len(output)}, "
        f"Σ<sub>j</sub>&nbsp;{d}a<sub>ij</sub>&nbsp;=&nbsp;{total:.4f})</p>"
    )


def bar_range(values: np.ndarray) -> tuple[float, float]:
    """The y range of bars of ``values``: from 0 (or the lowest value, when negative) to the highest,
    with a margin, so that every bar, up or down, is inside the chart."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    low = min(0.0, float(finite.min(initial=0.0)))
    high = max(0.0, float(finite.max(initial=0.0)))
    span = (high - low) or 1e-6
    return (low - 0.08 * span if low < 0 else 0.0), high + 0.08 * span


TOP_ROOM_PX = 8
MIN_BARS_PX = 110  # the bars' own height at least, below the header and above the key labels
CHART_FRAME_PX = 6  # the plot's margins and the view's frame, below and above the bars


class QueryFocusPanel(QGroupBox):
    """Given the state (duck-typed), it follows the trace, the focused query and head."""

    def __init__(self, state, parent: QWidget | None = None, jobs=None):
        """``jobs``: the window's read jobs (explorer.jobs.ReadJobs); None reads in the caller's turn."""
        super().__init__("Focus on one query", parent)
        self.state, self.jobs = state, jobs
        self._answers: OrderedDict[tuple, tuple] = OrderedDict()  # (generation, stage, head, row) -> numbers
        self.header = QLabel(PROMPT)
        self.header.setWordWrap(True)
        self.header.setObjectName("focusHeader")
        self.axis = TokenAxis("bottom")
        # weights' numbers thinned to the chart's height: squeezed by the inspector they overprinted
        self.chart = pg.PlotWidget(axisItems={"bottom": self.axis, "left": ValueAxis("left")}, background="w")
        self.chart.setMouseEnabled(x=False, y=False)
        self.chart.hideButtons()
        self.chart.setMenuEnabled(False)
        self.chart.setLabel("left", "weight a_ij")
        self.chart.getAxis("left").setTextPen(TEXT_RGB)  # near-black, as the token labels
        self.chart.setMinimumHeight(MIN_BARS_PX + 100)
        # The bars keep MIN_BARS_PX whatever the key labels below them take (upright, 16,384 keys'
        # positions: ~100 px): with a fixed minimum they were left ~30 px under a long input's labels.
        self.axis.geometryChanged.connect(self._fit_height)
        # Room above the plot for half a tick label: the top tick's value ("0.35") is never cut in half.
        self.chart.getPlotItem().layout.setContentsMargins(1, TOP_ROOM_PX, 1, 1)
        # No outline: with hundreds of keys the bars are thinner than a pixel and would be all outline.
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8, brush=BAR_BRUSH, pen=None)
        self.chart.addItem(self.bars)
        # Signed bars (Difference: edited − original) grow both ways from this line.
        self.zero_line = pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen(TEXT_RGB, width=1))
        self.zero_line.setVisible(False)
        self.chart.addItem(self.zero_line)
        self._sign_brushes = tuple(pg.mkBrush(c) for c in sign_colours())  # (below 0, above), made once
        self.bar_readout = QLabel(" ")
        self.bar_readout.setObjectName("readout")
        self.sum_text = QLabel()
        self.sum_text.setTextFormat(Qt.TextFormat.RichText)
        self.sum_text.setWordWrap(True)
        for label in (self.header, self.sum_text):  # wrap to the panel's width rather than widen it
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        self.sum_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.chart, 1)
        layout.addWidget(self.bar_readout)
        layout.addWidget(self.sum_text)
        self.weights_row: np.ndarray | None = None  # what the bars show, for tests

        self.bar_step = 1  # keys per bar
        self.chart.scene().sigMouseMoved.connect(self._hover)
        self.chart.getPlotItem().getViewBox().sigResized.connect(self._paint_bars)
        for signal in (state.trace_changed, state.query_changed, state.focus_head_changed, state.stage_changed):
            signal.connect(self.refresh)
        self.vector: np.ndarray | None = None  # the row vector shown on a per-token stage (tests)

    def refresh(self, *_) -> None:
        display, row, head = self.state.display, self.state.query, self.state.focus_head
        trace: AttentionTrace | None = display.trace if display is not None else None
        if trace is None or "weights" not in trace or not 0 <= row < len(trace.query_tokens):
            if self.jobs is not None:
                self.jobs.cancel("focus")  # an answer on its way is for a focus no longer asked
            self._clear(PROMPT)
            return
        stage = trace[self.state.stage_name] if self.state.stage_name in trace else None
        per_token = stage is not None and stage.col_axis == "feature"
        key = (display.generation, stage.name if per_token else "", head, row)
        if self._answers and next(iter(self._answers))[0] != display.generation:
            self._answers.clear()  # the numbers of another run
        answer = self._answers.get(key)
        if answer is None:
            def read():  # on the read thread
                return key, read_focus(trace, stage, head, row)

            if self.jobs is not None:
                # Shown when it comes (held while the heatmaps of a result are on their way).
                self.jobs.ask("focus", read, self._arrived, held=True)
                return
            answer = self._keep(*read())
        weights, output, vector = answer  # (n_k,), (d_v,), the row's (d,) or None
        keys = trace["weights"].col_labels or trace.key_tokens  # with a learned sink: its column, last
        difference = bool(getattr(display.request, "difference", False))  # edited − original is shown
        if vector is not None:  # a vector per token: show the row's
            self._show_vector(trace, stage, row, head, (weights, output, vector), difference)
            return
        self.vector = None
        set_axis_title(self.chart.getAxis("left"), "Δ weight a_ij" if difference else "weight a_ij")
        groups = trace["weights"].head_groups  # GQA: the key/value head each query head reads
        reads = f" (reads key/value head {groups[head]})" if groups else ""
        self.header.setText(
            f"Query <b>“{rich_safe(display_label(trace.query_tokens[row]))}”</b> (row {row}), head {head}{reads}: "
            + ("how its attention to each key changed (edited − original)." if difference
               else "how much it attends to each key.")
        )  # fmt: skip
        self.weights_row = weights
        self._paint_bars()
        self.axis.set_labels(keys)
        self.chart.setXRange(0, len(keys), padding=0.02)
        self.chart.setYRange(*bar_range(weights), padding=0)
        values = ""
        if groups:
            sharing = ", ".join(str(q) for q, g in enumerate(groups) if g == groups[head])
            values = f"the values of key/value head {groups[head]}, shared by heads {sharing}"
        self.sum_text.setText(contributions_html(keys, weights, output, values, len(trace.key_tokens), difference))
        self.sum_text.setToolTip("o_i = [" + ", ".join(str(np.float32(v)) for v in output) + "]")

    def _fit_height(self) -> None:
        """The chart's minimum: the bars' MIN_BARS_PX plus the key labels' height now and the margins."""
        wanted = int(MIN_BARS_PX + self.axis.height() + TOP_ROOM_PX + CHART_FRAME_PX)
        if wanted != self.chart.minimumHeight():
            self.chart.setMinimumHeight(wanted)

    def _keep(self, key: tuple, answer: tuple) -> tuple:
        display = self.state.display
        if display is not None and key[0] == display.generation:  # never the numbers of another run
            self._answers[key] = answer
            while len(self._answers) > KEPT_ANSWERS:
                self._answers.popitem(last=False)
        return answer

    def _arrived(self, keyed) -> None:
        """The numbers of the latest ask (older asks' answers never come: explorer.jobs)."""
        self._keep(*keyed)
        self.refresh()  # shows them if they are still the focus, else asks for the focus now

    def _show_vector(self, trace, stage, row: int, head: int, answer: tuple, difference: bool) -> None:
        """The selected row of a per-token stage as bars over its feature indices (0-based); on the
        outputs the decomposition o_i = Σ_j a_ij v_j (or its change, ``difference``) below it."""
        weights, output, vector = answer
        r = min(row, stage.shape[-2] - 1)
        h = array_head(stage, head) if stage.per_head else 0
        self.vector, self.weights_row = vector, None
        token = display_label(stage.row_labels[r]) if r < len(stage.row_labels) else str(r)
        where = f", {head_name(stage, h)}" if stage.per_head else ""
        self.header.setText(f"Row {r} <b>“{rich_safe(token)}”</b> of {rich_safe(stage.title)}{where}: its "
                            f"{len(vector)} features (indices from 0).")  # fmt: skip
        self.bars.setOpts(x=np.arange(len(vector)) + 0.5, height=vector, width=0.8, brushes=None)
        self.zero_line.setVisible(bool(vector.size) and float(np.nanmin(vector)) < 0)
        self.axis.set_labels(tuple(str(i) for i in range(len(vector))))
        set_axis_title(self.chart.getAxis("left"), "value")
        self.chart.setXRange(0, max(1, len(vector)), padding=0.02)
        self.chart.setYRange(*bar_range(vector), padding=0)
        if stage.name in OUTPUT_STAGES:
            self.sum_text.setText(contributions_html(trace.key_tokens, weights, output, difference=difference))
        else:
            preview = ", ".join(f"{v:.3f}" for v in vector[:VECTOR_PREVIEW])
            more = ", …" if len(vector) > VECTOR_PREVIEW else ""
            self.sum_text.setText(f"[{preview}{more}] &nbsp;(d = {len(vector)})")
        self.sum_text.setToolTip("[" + ", ".join(str(np.float32(v)) for v in vector) + "]")

    def _paint_bars(self, *_) -> None:
        """Many keys: one bar per block of keys that share a screen pixel, as tall as their largest
        weight (models.engine.pixels, as the heatmaps), peaks widened to 3 pixels so one key is seen."""
        weights = self.weights_row
        if weights is None:
            return
        pixels = int(self.chart.getPlotItem().getViewBox().width() * self.chart.devicePixelRatioF())
        signed = bool(weights.size) and float(np.nanmin(weights)) < 0  # Difference: largest magnitudes kept
        heights, step = reduce_row(weights, min(MAX_BARS, pixels) if pixels > 0 else MAX_BARS, signed=signed)
        if step > 1:
            heights = enlarge_peaks(heights[None, :], signed=signed)[0]
        x = np.arange(len(heights)) * step + step / 2
        brushes = None
        if signed:  # the sign in colour too: the diverging map's blue end below 0, its red end above
            negative, positive = self._sign_brushes
            brushes = [negative if h < 0 else positive for h in heights]
        self.bars.setOpts(x=x, height=heights, width=step if step > 1 else 0.8, brushes=brushes)
        self.zero_line.setVisible(signed)
        self.bar_step = step

    def _clear(self, message: str) -> None:
        self.header.setText(message)
        self.weights_row = None
        self.bars.setOpts(x=[], height=[], brushes=None)
        self.zero_line.setVisible(False)
        self.axis.set_labels(())
        self.sum_text.setText("")
        self.sum_text.setToolTip("")
        self.bar_readout.setText(" ")

    def _hover(self, scene_pos) -> None:
        if self.weights_row is None:
            return
        view = self.chart.getPlotItem().getViewBox()
        if not view.sceneBoundingRect().contains(scene_pos):
            return
        j = int(np.floor(view.mapSceneToView(scene_pos).x()))
        if 0 <= j < len(self.weights_row) and self.vector is None:
            trace = self.state.display.trace
            token = (trace["weights"].col_labels or trace.key_tokens)[j]
            self.bar_readout.setText(f"key {j} <b>{rich_safe(token)}</b>: a = <b>{np.float32(self.weights_row[j])}</b>")

