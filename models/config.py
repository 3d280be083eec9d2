"""What to compute: frozen, validated settings handed to every stage of the pipeline."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.errors import Cancelled, InputError  # noqa: F401 - re-exported: most callers import them from here
from models.limits import (  # noqa: F401 - re-exported: callers import them from here
    CHOICES,
    DEFAULT_MAX_TOKENS,
    DEVICES,
    DTYPES,
    MASKS,
    POSITIONAL,
    POSITIVE,
    SCORES,
    in_bounds,
    said,
)

# What each choice is called in a message ("unknown positional encoding 'x'; choose one of …").
_CALLED = {"pe": "positional encoding"}


@dataclass(frozen=True)
class AttentionConfig:
    heads: int = 2
    d_model: int = 16
    d_k: int | None = None  # None: d_model // heads (must divide)
    d_v: int | None = None  # None: same as d_k
    d_out: int | None = None  # None: d_model
    mask: str = "none"
    pad_positions: tuple[int, ...] = ()  # key positions hidden by the padding mask
    score: str = "scaled"
    pe: str = "none"
    temperature: float = 1.0
    seed: int = 0
    bias: bool = False  # random biases on the projections (weights files bring their own)
    device: str = "auto"
    max_tokens: int = DEFAULT_MAX_TOKENS

    # --- derived sizes -------------------------------------------------------------------
    @property
    def head_dim_k(self) -> int:
        return self.d_k if self.d_k is not None else self.d_model // self.heads

    @property
    def head_dim_v(self) -> int:
        return self.d_v if self.d_v is not None else self.head_dim_k

    @property
    def out_dim(self) -> int:
        return self.d_out if self.d_out is not None else self.d_model

    def replace(self, **changes: Any) -> AttentionConfig:
        return dataclasses.replace(self, **changes)

    def validate(self) -> AttentionConfig:
        """Raise :class:`InputError` naming the first problem; return self when valid."""
        for name in ("heads", "d_model", "max_tokens", "d_k", "d_v", "d_out"):  # models/limits.py: RANGES
            value = getattr(self, name)
            if value is None and name in ("d_k", "d_v", "d_out"):
                continue  # derived (head_dim_k, …)
            if not isinstance(value, int) or not in_bounds(name, value):  # isinstance: True is taken as 1
                raise InputError(f"{name} must be {said(name)}, got {value!r}")
        if self.d_k is None and self.d_model % self.heads:
            raise InputError(
                f"d_model={self.d_model} is not divisible by heads={self.heads}; "
                f"choose another head count or set d_k explicitly"
            )
        for name in ("mask", "score", "pe", "device"):  # models/limits.py: CHOICES
            value, choices = getattr(self, name), CHOICES[name]
            if value not in choices:
                raise InputError(f"unknown {_CALLED.get(name, name)} {value!r}; choose one of {', '.join(choices)}")
        for name in POSITIVE:
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise InputError(f"{name} must be a positive number, got {value!r}")
        from models.checks import check_seed

        check_seed(self.seed)  # torch takes 64 bits; refuse rather than overflow
        if any((not isinstance(p, int)) or p < 0 for p in self.pad_positions):
            raise InputError(f"pad positions must be non-negative integers, got {self.pad_positions}")
        return self

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["pad_positions"] = list(self.pad_positions)
        d["d_k"], d["d_v"], d["d_out"] = self.head_dim_k, self.head_dim_v, self.out_dim
        return d


@dataclass(frozen=True, eq=False)
class AttentionWeights:
    """Per-head projection weights (right-multiplication: ``Q = X W_q``).

    Shapes: ``W_q, W_k (h, d_model, d_k)``, ``W_v (h, d_model, d_v)``, ``W_o (h*d_v, d_out)``,
    biases ``b_q, b_k (h, d_k)``, ``b_v (h, d_v)``, ``b_o (d_out,)`` or None.
    Score parameters: additive ``W_1, W_2 (h, d_k, d_k)``, ``w (h, d_k)``; general ``W_g (h, d_k, d_k)``.
    """

    W_q: np.ndarray
    W_k: np.ndarray
    W_v: np.ndarray
    W_o: np.ndarray | None = None  # None: seeded random (see models.engine.weights.complete_weights)
    b_q: np.ndarray | None = None
    b_k: np.ndarray | None = None
    b_v: np.ndarray | None = None
    b_o: np.ndarray | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class AttentionRequest:
    """Everything one computation needs. Either a sentence or an embeddings matrix supplies the
    keys/values; an optional second sentence or matrix supplies the queries (cross-attention)."""

    config: AttentionConfig = AttentionConfig()
    sentence: str | None = None
    embeddings: np.ndarray | None = None  # (n, d_model), replaces the sentence
    labels: tuple[str, ...] | None = None  # token labels for ``embeddings``
    cross_sentence: str | None = None
    cross_embeddings: np.ndarray | None = None
    cross_labels: tuple[str, ...] | None = None
    weights: AttentionWeights | None = None  # None: seeded random
    custom_mask: np.ndarray | None = None  # (n_q, n_k) bool, True = hidden
    generation: int = 0  # for the GUI worker: latest request wins

    @property
    def is_cross(self) -> bool:
        return bool(self.cross_sentence and self.cross_sentence.strip()) or (
            self.cross_embeddings is not None
        )
