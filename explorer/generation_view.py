"""What the Generate panel shows of one generation, prepared on the worker (numpy, no Qt, no torch).

Steps are numbered from 0: step ``s`` shows position ``p = prompt_length - 1 + s`` (step 0: the
prompt's last token, whose output chose the first generated token). At step s the views show
rows 0..p: the attention grows row by row as the slider moves.
"""

from __future__ import annotations

import math

import numpy as np

from models.generate import Generation
from models.survey import head_metrics

from .sink_scale import first_key_out_of_scale
from .thumbnails import COLOURS, EMPTY_INDEX, THUMB, block_max


class GenerationView:
    def __init__(self, gen: Generation, attention: np.ndarray | None = None, causal: bool = True) -> None:
        """``attention``: given for an encoder's mask predictions (``causal`` False: every row
        is shown at every step, a step being a mask token)."""
        self.gen = gen
        self.causal = causal
        self.attention = gen.attention() if attention is None else attention  # (L, h, n, n)
        self.sink = self.attention[:, :, :, 0].transpose(2, 0, 1).copy()  # (n, L, h): weight on token 0
        self.tokens = tuple(gen.tokens)
        self.lens_tokens = _token_table(gen)  # id -> text, every id the lens or the bars name
        self.metrics = head_metrics(self.attention)  # of the whole sequence, sink included
        self._thumbs: dict[tuple[bool, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._sink_clipped: np.ndarray | None = None
        self.thumbnails_for(fit_each=True, sink_out=False)  # the default view, made on the worker

    def thumbnails_for(self, fit_each: bool, sink_out: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(block maxima (L, h, t, t), colour top (L, h, 1, 1))`` of the whole sequence, cached.
        ``fit_each``: each head from 0 to its largest weight over the sequence (else 0 to 1);
        ``sink_out``: the first key left out of that scale."""
        key = (fit_each, sink_out)
        if key not in self._thumbs:
            a = self._clipped() if sink_out else self.attention
            small = block_max(a, THUMB)
            top = small.max(axis=(-2, -1), keepdims=True) if fit_each else np.ones(small.shape[:2] + (1, 1))
            self._thumbs[key] = (small, np.where(top > 0, top, 1.0).astype(np.float32))
        return self._thumbs[key]

    def _clipped(self) -> np.ndarray:
        if self._sink_clipped is None:
            self._sink_clipped = first_key_out_of_scale(self.attention)
        return self._sink_clipped

    def step_thumbnails(self, step: int, fit_each: bool, sink_out: bool) -> np.ndarray:
        """``(L, h, t, t)`` uint8: every head's thumbnail with rows 0..p only (p: the step's
        position); rows after p are empty, the block holding p is reduced over rows up to p."""
        small, top = self.thumbnails_for(fit_each, sink_out)
        n, t = self.attention.shape[-1], small.shape[-1]
        b = max(1, math.ceil(n / THUMB))
        p = self.last_row(step)
        r = p // b
        shown = small[..., : r + 1, :].copy()
        part = (self._clipped() if sink_out else self.attention)[:, :, r * b : p + 1]  # (L, h, ≤b, n)
        shown[..., r : r + 1, :] = _row_block(part, b, t)
        out = np.full(small.shape, EMPTY_INDEX, np.uint8)
        out[..., : r + 1, :] = np.rint(np.clip(shown / top, 0, 1) * (COLOURS - 1))
        return out

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

    def lens_label(self, layer: int, position: int) -> str:
        return self.lens_tokens.get(int(self.gen.lens_ids[layer, position]), "?")

    def lens_labels(self) -> list[list[str]]:
        return [[self.lens_label(layer, p) for p in range(self.gen.n)] for layer in range(self.gen.num_layers)]

    def lens_hover(self, layer: int, position: int) -> str:
        g = self.gen
        top = ", ".join(f"{self.lens_tokens.get(int(i), '?')!r} {p:.3f}"
                        for i, p in zip(g.lens_top_ids[layer, position], g.lens_top_prob[layer, position]))  # fmt: skip
        after = ""
        if position + 1 < g.n:
            after = f"; the next token {self.tokens[position + 1]!r} has {g.lens_prob[layer, position]:.3f}"
        return f"L{layer}, position {position} {self.tokens[position]!r}: top-5 {top}{after}"


def _row_block(part: np.ndarray, b: int, t: int) -> np.ndarray:
    """Rows ``part (L, h, r, n)`` (r <= b) reduced to one thumbnail row of ``t`` block maxima."""
    n = part.shape[-1]
    padded = np.full(part.shape[:-1] + (t * b,), -np.inf, part.dtype)
    padded[..., :n] = part
    return padded.max(axis=-2, keepdims=True).reshape(part.shape[:2] + (1, t, b)).max(-1)


def _token_table(gen: Generation) -> dict[int, str]:
    return dict(gen.token_names)
