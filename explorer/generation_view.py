"""What the Generate panel shows of one generation, prepared on the worker (numpy, no Qt, no torch).

Steps are numbered from 0: step ``s`` shows position ``p = prompt_length - 1 + s`` (step 0: the
prompt's last token, whose output chose the first generated token). At step s the views show
rows 0..p: the attention grows row by row as the slider moves.
"""

from __future__ import annotations

import numpy as np

from models.generate import Generation
from models.survey import head_metrics

from .sink_scale import first_key_out_of_scale
from .thumbnails import EMPTY_INDEX, thumbnail_indices


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
        self._thumbs: dict[tuple[bool, bool], np.ndarray] = {}  # colour tops per view
        self._sink_clipped: np.ndarray | None = None
        self.thumbnails_for(fit_each=True, sink_out=False)  # the default view, made on the worker

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

    def step_thumbnails(self, step: int, fit_each: bool, sink_out: bool) -> np.ndarray:
        """``(L, h, t, t)`` uint8: every head's thumbnail (the one reduction and colour layout of
        explorer.thumbnails) with rows 0..p only (p: the step's position); the rows after p are
        empty and take no part in the block holding p."""
        tops = self.thumbnails_for(fit_each, sink_out)
        a = self._clipped() if sink_out else self.attention
        n = a.shape[-2]
        p = self.last_row(step)
        if p + 1 < n:
            a = a.copy()
            a[..., p + 1 :, :] = 0  # weights are ≥ 0: no block maximum changes but by the rows shown
        out = np.stack([thumbnail_indices(a[layer], True, tops=tops[layer]) for layer in range(a.shape[0])])
        per_pixel = -(-n // out.shape[-2])  # rows a thumbnail pixel holds
        out[..., p // per_pixel + 1 :, :] = EMPTY_INDEX
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


def _token_table(gen: Generation) -> dict[int, str]:
    return dict(gen.token_names)
