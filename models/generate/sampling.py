"""What to generate and how to pick each token: greedy, or sampled (temperature, top-k, top-p, seed).

Greedy (``temperature == 0``, the default) takes the most likely token, the first of equals, as
``torch.argmax`` and transformers' ``generate(do_sample=False)`` do. Sampling divides the logits by
the temperature, keeps the ``top_k`` most likely tokens and then the smallest set whose
probabilities reach ``top_p``, and draws from what is left with a ``torch.Generator`` seeded by
``seed``: the same settings give the same tokens every time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from models.checks import check_seed
from models.command_fields import MAX_NEW_TOKENS, MAX_SHOWN  # the rows' ranges
from models.config import InputError
from models.engine.host import to_host


@dataclass(frozen=True)
class GenerateSettings:
    max_new_tokens: int = 20
    temperature: float = 0.0  # 0: greedy
    top_k: int | None = None  # sampling only: keep the k most likely tokens
    top_p: float | None = None  # sampling only: keep the most likely tokens up to this mass
    seed: int = 0
    shown: int = 10  # next tokens kept per step (tokens.json, the bars)
    max_tokens: int | None = None  # the prompt's token limit (models.config.DEFAULT_MAX_TOKENS)
    lens: bool = True  # False: skip the logit lens (its arrays stay zero), e.g. to time generation alone

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @classmethod
    def from_rows(cls, values: object) -> GenerateSettings:
        """The one mapping of ``generate``'s rows (models/command_fields.py: ``GENERATE_ROWS``) to settings:
        ``values`` has an attribute per row dest (parsed options, a Namespace of the API's keywords, the
        window's form); ``--top`` is :attr:`shown`, an unset temperature greedy, an unset ``--max-tokens``
        the default. Checked by the rows' ranges (the command line's messages; refused, never clamped)
        where a value is a number, then by :meth:`validate`; InputError (one line) when not."""
        from models.command_fields import GENERATE_ROWS
        from models.config import DEFAULT_MAX_TOKENS
        from models.fields import check_ranges

        def given(dest: str, default=None):
            value = getattr(values, dest, None)
            return default if value is None else value

        numbers = [f for f in GENERATE_ROWS if isinstance(getattr(values, f.dest, None), (int, float))
                   and not isinstance(getattr(values, f.dest), bool)]  # fmt: skip
        check_ranges(values, fields=numbers)  # a string is named by validate (the API's wrong types)
        return cls(max_new_tokens=given("max_new_tokens", 20), temperature=given("temperature", 0.0),
                   top_k=given("top_k"), top_p=given("top_p"), seed=given("seed", 0), shown=given("top", 10),
                   max_tokens=given("max_tokens", DEFAULT_MAX_TOKENS)).validate()  # fmt: skip

    def validate(self) -> GenerateSettings:
        n = self.max_new_tokens
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_NEW_TOKENS:
            raise InputError(f"max new tokens must be an integer from 1 to {MAX_NEW_TOKENS}, got {n!r}")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise InputError(f"temperature must be a finite number ≥ 0 (0: greedy), got {t!r}")
        if self.greedy and (self.top_k is not None or self.top_p is not None):
            raise InputError("top-k and top-p apply only when sampling; give a temperature above 0")
        k = self.top_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise InputError(f"top-k must be a positive integer, got {k!r}")
        p = self.top_p
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1):
            raise InputError(f"top-p must be a number in (0, 1], got {p!r}")
        check_seed(self.seed)
        m = self.max_tokens
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise InputError(f"--max-tokens must be at least 1, got {m}")
        s = self.shown
        if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= MAX_SHOWN:
            raise InputError(f"the top-k shown must be an integer from 1 to {MAX_SHOWN}, got {s!r}")
        return self

    def describe(self) -> str:
        if self.greedy:
            return "greedy"
        parts = [f"T={self.temperature:g}"]
        if self.top_k is not None:
            parts.append(f"top-k {self.top_k}")
        if self.top_p is not None:
            parts.append(f"top-p {self.top_p:g}")
        return "sampled, " + ", ".join(parts) + f", seed {self.seed}"


def sampling_distribution(logits: Tensor, s: GenerateSettings) -> Tensor:
    """The probabilities ``(vocab,)`` a token is drawn from: temperature, then top-k, then top-p."""
    x = logits / s.temperature
    if s.top_k is not None and s.top_k < x.shape[-1]:
        kth = torch.topk(x, s.top_k).values[-1]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    if s.top_p is not None and s.top_p < 1:
        order = torch.argsort(probs, descending=True)
        sorted_probs = probs[order]
        before = torch.cumsum(sorted_probs, 0) - sorted_probs  # mass of the more likely tokens
        drop = order[before >= s.top_p]  # the most likely token always stays
        probs = probs.clone()
        probs[drop] = 0
        probs = probs / probs.sum()
    return probs


class Chooser:
    """Picks each next token from the model's logits ``(vocab,)``."""

    def __init__(self, settings: GenerateSettings) -> None:
        self.settings = settings
        self.generator = torch.Generator().manual_seed(settings.seed)

    def __call__(self, logits: Tensor) -> int:
        if self.settings.greedy:
            return int(torch.argmax(logits))
        probs = sampling_distribution(to_host(logits.double()), self.settings)
        return int(torch.multinomial(probs, 1, generator=self.generator))
