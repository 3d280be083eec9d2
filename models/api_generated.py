"""A generation as the Python API gives it (:class:`Generated`) and generate's settings
(:func:`generation_settings`); both re-exported by :mod:`models.api`, the front door."""

from __future__ import annotations

import argparse
from functools import cached_property

import numpy as np


def generation_settings(max_new_tokens: int = 20, temperature: float | None = None, top_k: int | None = None,
                        top_p: float | None = None, seed: int = 0, top: int = 10,
                        max_tokens: int | None = None):  # fmt: skip
    """The checked models.generate.GenerateSettings of ``generate``'s options, as ``main.py generate``
    builds them from its own (tests/models/test_api.py holds the two equal)."""
    from models.generate import GenerateSettings

    return GenerateSettings.from_rows(argparse.Namespace(
        max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, top=top,
        max_tokens=max_tokens))  # fmt: skip


class Generated:
    """One generation (:meth:`Model.generate`): the prompt's tokens then the generated ones.
    ``raw`` is models.generate.Generation (each step's next-token choices, the lens' top tokens)."""

    def __init__(self, raw) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return f"Generated({self.raw.model}, {self.prompt_length} + {self.raw.generated} tokens: {self.text!r})"

    ids = property(lambda self: list(self.raw.ids), doc="every token id, prompt first")
    tokens = property(lambda self: list(self.raw.tokens), doc="every token, prompt first")
    prompt_length = property(lambda self: self.raw.prompt_length, doc="how many of them are the prompt")
    text = property(lambda self: self.raw.text, doc="the generated tokens decoded (without the prompt)")
    stopped = property(lambda self: self.raw.stopped, doc='"eos", "length" or "max positions"')
    weights = property(lambda self: self.raw.weights, doc="how the layers were held (Model.weights)")
    lens_ids = property(lambda self: self.raw.lens_ids, doc="(L, n): the logit lens' top token after each layer")
    lens_prob = property(lambda self: self.raw.lens_prob,
                         doc="(L, n): the lens' probability of the sequence's next token")  # fmt: skip

    @cached_property
    def attention(self) -> np.ndarray:
        """``(layers, heads, n, n)`` float32: every position's attention over the keys before it
        (zero above the diagonal), as ``attention.npy``."""
        return self.raw.attention()
