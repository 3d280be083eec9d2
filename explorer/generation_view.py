"""What the Generate panel shows of one generation, prepared on the worker (numpy, no Qt, no torch).

Steps are numbered from 0: step ``s`` shows position ``p = prompt_length - 1 + s`` (step 0: the
prompt's last token, whose output chose the first generated token). At step s the views show
rows 0..p: the attention grows row by row as the slider moves.
"""

from __future__ import annotations

import numpy as np

from models.generate import Generation


class GenerationView:
    def __init__(self, gen: Generation) -> None:
        self.gen = gen
        self.attention = gen.attention()  # (L, h, n, n)
        self.sink = self.attention[:, :, :, 0].transpose(2, 0, 1).copy()  # (n, L, h): weight on token 0
        self.tokens = tuple(gen.tokens)
        self.lens_tokens = _token_table(gen)  # id -> text, every id the lens or the bars name

    @property
    def steps(self) -> int:
        return len(self.gen.steps)

    def position(self, step: int) -> int:
        return self.gen.prompt_length - 1 + step

    def rows_upto(self, step: int) -> np.ndarray:
        """``(L, h, p + 1, p + 1)``: every head over positions 0..p of step ``step``."""
        p = self.position(step) + 1
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
