"""What the Generate panel shows of one generation, prepared on the worker (numpy, no Qt, no torch).

Steps are numbered from 0: step ``s`` shows position ``p = prompt_length - 1 + s`` (step 0: the
prompt's last token, whose output chose the first generated token). At step s the views show
rows 0..p: the attention grows row by row as the slider moves. The thumbnails are made at the side
the model view asks for (its device pixels, explorer.images.thumbnails.tile_side), again after a
resize: on the generation's worker first, then on the read thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.images.sink_scale import first_key_out_of_scale
from explorer.images.thumbnails import EMPTY_INDEX, THUMB, thumbnail_indices, thumbnail_steps
from explorer.widgets.labels import visible_whitespace
from models.engine.colour_index import COLOURS, MASKED_INDEX
from models.engine.mask_rule import hidden_array
from models.generate import Generation
from models.reads.survey import head_metrics

MASKED = MASKED_INDEX  # the chosen head's cells not shown at a step: rows not generated yet, the causal future


@dataclass(frozen=True)
class StepFrame:
    """One step as the panel paints it."""

    step: int
    position: int
    text: str  # the step line
    side: int  # the side the thumbnails were made for (device pixels)
    thumbs: np.ndarray  # (L, h, t, t) uint8: every head's rows up to the step, at ``side``
    layer: int
    head: int
    matrix: np.ndarray  # (n, n) uint8: the chosen head's colour indices, MASKED where not shown
    matrix_top: float  # the weight drawn in the top colour
    sink_out: bool
    matrix_title: str
    head_sink: np.ndarray  # (n,) the chosen head's weight on token 0 at every position
    mean_sink: np.ndarray  # (n,) the mean of its layer's heads
    bar_tokens: tuple[str, ...]
    bar_probs: tuple[float, ...]
    bar_chosen: int | None  # the chosen token's row among the bars (None: outside them)
    chosen_token: str
    chosen_prob: float | None


def head_indices(a: np.ndarray, position: int, sink_out: bool = False,
                 last_row: int | None = None) -> tuple[np.ndarray, float]:  # fmt: skip
    """``a (n, n)`` one head -> ``(n, n)`` uint8 colour indices (0..COLOURS - 1, MASKED) and the
    weight of the top colour: rows after ``last_row`` (default ``position``) MASKED, and for a
    decoder (no ``last_row``) the causal upper triangle too; the scale is 0 to the largest weight
    shown (``sink_out``: off the first key)."""
    n = a.shape[0]
    last = position if last_row is None else last_row
    shown = a[: last + 1]
    scaled = first_key_out_of_scale(shown) if sink_out else shown
    top = float(np.nanmax(scaled)) if scaled.size else 1.0
    top = top if top > 0 else 1.0
    indices = np.full((n, n), MASKED, np.uint8)  # not generated yet at this step
    indices[: last + 1] = np.rint(np.clip(scaled / top, 0, 1) * (COLOURS - 1)).astype(np.uint8)
    if last_row is None:  # a decoder: the future is hidden
        indices[: last + 1][hidden_array(last + 1, n, causal=True)] = MASKED
    return indices, top


class GenerationView:
    def __init__(self, gen: Generation, attention: np.ndarray | None = None, causal: bool = True,
                 side: int = THUMB) -> None:  # fmt: skip
        """``attention``: given for an encoder's mask predictions (``causal`` False: every row
        is shown at every step, a step being a mask token); ``side``: the thumbnails' side the
        model view asks for (made here, on the worker)."""
        self.gen = gen
        self.causal = causal
        self.attention = gen.attention() if attention is None else attention  # (L, h, n, n)
        self.sink = self.attention[:, :, :, 0].transpose(2, 0, 1).copy()  # (n, L, h): weight on token 0
        self.tokens = tuple(gen.tokens)
        self.lens_tokens = _token_table(gen)  # id -> text, every id the lens or the bars name
        self.metrics = head_metrics(self.attention)  # of the whole sequence, sink included
        self._thumbs: dict[tuple[bool, bool], np.ndarray] = {}  # colour tops per view
        self._sink_clipped: np.ndarray | None = None
        self._whole: dict[tuple[bool, bool, int], np.ndarray] = {}  # whole-sequence thumbnails per view
        self.whole_thumbnails(fit_each=True, sink_out=False, side=side)  # the default view, made on the worker

    def thumbnails_for(self, fit_each: bool, sink_out: bool) -> np.ndarray:
        """``(L, h)`` each head's colour top over the whole sequence (1 for all without
        ``fit_each``), cached; ``sink_out``: the first key left out of that scale."""
        key = (fit_each, sink_out)
        if key not in self._thumbs:
            a = self._clipped() if sink_out else self.attention
            self._thumbs[key] = a.max(axis=(-2, -1)) if fit_each else np.ones(a.shape[:2], np.float32)
        return self._thumbs[key]

    def _clipped(self) -> np.ndarray:
        if self._sink_clipped is None:
            self._sink_clipped = first_key_out_of_scale(self.attention)
        return self._sink_clipped

    def whole_thumbnails(self, fit_each: bool, sink_out: bool, side: int = THUMB) -> np.ndarray:
        """``(L, h, t, t)`` uint8: every head's thumbnail over the whole sequence at ``side`` (each
        head at the colour top of :meth:`thumbnails_for`), cached: a step changes at most two of its
        rows. Only the latest side's are kept."""
        key = (fit_each, sink_out, side)
        if key not in self._whole:
            tops = self.thumbnails_for(fit_each, sink_out)
            a = self._clipped() if sink_out else self.attention
            L, h = a.shape[:2]
            flat = thumbnail_indices(a.reshape(L * h, *a.shape[2:]), True, side=side, tops=tops.reshape(-1))
            kept = {k: v for k, v in self._whole.items() if k[2] == side}  # other sides are not shown again
            self._whole = kept | {key: flat.reshape(L, h, *flat.shape[1:])}
        return self._whole[key]

    def step_thumbnails(self, step: int, fit_each: bool, sink_out: bool, side: int = THUMB) -> np.ndarray:
        """``(L, h, t, t)`` uint8: every head's thumbnail (the one reduction and colour layout of
        explorer.images.thumbnails) with rows 0..p only (p: the step's position); the rows after p are
        empty and take no part in the block holding p.

        Equal to reducing the rows 0..p (rows after p set to 0) but without doing it: a thumbnail
        pixel row holds ``k`` rows and a peak is enlarged to its neighbouring pixel rows, so only
        the pixel row ``r`` holding p and the one above it differ from the whole sequence's
        thumbnail; those two are reduced again from the rows of pixel rows r - 2 .. r, at the same
        ``side`` (so by the same number of cells a pixel)."""
        whole = self.whole_thumbnails(fit_each, sink_out, side)
        a = self._clipped() if sink_out else self.attention
        n = a.shape[-2]
        p = self.last_row(step)
        out = whole.copy()
        if p + 1 >= n:
            return out
        k = thumbnail_steps(n, a.shape[-1], side)[0]  # rows a thumbnail pixel holds
        r = p // k  # the pixel row holding p
        first = max(0, r - 2)  # the pixel rows whose blocks the enlarged rows r - 1 and r read
        L, h = a.shape[:2]
        band = np.zeros((L * h, (r - first + 1) * k, a.shape[-1]), np.float32)  # whole blocks of rows
        band[:, : p + 1 - first * k] = a[:, :, first * k : p + 1].reshape(L * h, -1, a.shape[-1])
        tops = self.thumbnails_for(fit_each, sink_out).reshape(-1)
        redone = thumbnail_indices(band, True, side=side, tops=tops).reshape(L, h, -1, whole.shape[-1])
        keep = max(0, r - 1)
        out[..., keep : r + 1, :] = redone[..., keep - first :, :]
        out[..., r + 1 :, :] = EMPTY_INDEX
        return out

    def frame(self, step: int, fit_each: bool, sink_out: bool, layer: int, head: int,
              side: int = THUMB) -> StepFrame:  # fmt: skip
        """What the panel paints at ``step`` (thumbnails at ``side``, the chosen head's colour
        indices, the sink lines, the bars, the texts): plain numpy, computed off the GUI thread."""
        g = self.gen
        p = self.position(step)
        s = g.steps[step]
        chosen = "" if s.chosen is None else f" → chose {quoted(g.token_names.get(s.chosen, '?'))}"
        kind = "prompt's last token" if step == 0 else f"generated token {step}"
        if not self.causal:
            kind = f"mask token {step + 1} of {self.steps}:"
        last_row = None if self.causal else g.n - 1
        indices, top = head_indices(self.attention[layer, head], p, sink_out, last_row)
        text = f"step {step} / {self.steps - 1}: position {p}, {kind} {quoted(self.tokens[p])}{chosen}"
        return StepFrame(
            step=step, position=p, text=text, side=side,
            thumbs=self.step_thumbnails(step, fit_each, sink_out, side),
            layer=layer, head=head, matrix=indices, matrix_top=top, sink_out=sink_out,
            matrix_title=f"L{layer} H{head}",
            head_sink=self.sink[:, layer, head], mean_sink=self.sink[:, layer].mean(-1),
            bar_tokens=s.top_tokens, bar_probs=s.top_probs,
            bar_chosen=s.top_ids.index(s.chosen) if s.chosen in s.top_ids else None,
            chosen_token=g.token_names.get(s.chosen, "?") if s.chosen is not None else "",
            chosen_prob=s.chosen_prob,
        )  # fmt: skip

    @property
    def steps(self) -> int:
        return len(self.gen.steps)

    def position(self, step: int) -> int:
        return self.gen.steps[step].position

    def last_row(self, step: int) -> int:
        """The last row shown at ``step``: its position (a decoder), or every row (an encoder)."""
        return self.position(step) if self.causal else self.gen.n - 1

    def rows_upto(self, step: int) -> np.ndarray:
        """``(L, h, p + 1, p + 1)``: every head over positions 0..p of step ``step``."""
        p = self.last_row(step) + 1
        return self.attention[:, :, :p, :p]

    def token_name(self, i: int) -> str:
        """A token id's text: the generation's own names, else the lens' tokenizer's."""
        return self.lens_tokens.get(i) or self.gen.lens.token(i)

    def lens_map(self) -> tuple[np.ndarray, list[list[str]]]:
        """Every cell of the lens map: ``(L, n)`` the next token's probability and each cell's top token.
        The lens computes them here (every cell in one product: models.generate.lens): called on the
        read thread once the generation is on screen."""
        g = self.gen
        top_ids, _, prob = g.lens.whole()
        labels = [[self.token_name(int(i)) for i in row] for row in top_ids[..., 0]]
        return prob, labels

    def lens_hover(self, layer: int, position: int) -> str:
        g = self.gen
        where = f"L{layer}, position {position} {quoted(self.tokens[position])}"
        if not g.lens.has(layer, position):  # being computed on the read thread: never waited for here
            return f"{where}: the logit lens is being computed…"
        ids, probs = g.lens.top(layer, position)
        top = ", ".join(f"{quoted(self.token_name(int(i)))} {p:.3f}"
                        for i, p in zip(ids, probs))  # fmt: skip
        after = ""
        if position + 1 < g.n:
            after = f"; the next token {quoted(self.tokens[position + 1])} has {g.lens.prob(layer, position):.3f}"
        return f"{where}: top-5 {top}{after}"


def quoted(token: str) -> str:
    """A token in a line of text, its whitespace drawn: ``'␣'``, never ``' '`` (Python's repr)."""
    return f"'{visible_whitespace(token)}'"


def _token_table(gen: Generation) -> dict[int, str]:
    return dict(gen.token_names)
