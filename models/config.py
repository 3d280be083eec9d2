"""What to compute: frozen, validated settings handed to every stage of the pipeline."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.errors import Cancelled, InputError  # noqa: F401 - re-exported: most callers import them from here

MASKS = ("none", "causal", "padding", "custom")
SCORES = ("dot", "scaled", "additive", "general")
POSITIONAL = ("none", "sinusoidal")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "bfloat16", "float16")  # --dtype: a model's layers below the traced one, generation
DEFAULT_MAX_TOKENS = 131072  # issue 34: the toy and decoders whose positions reach it; memory is checked first


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
        for name in ("heads", "d_model", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be a positive integer, got {value!r}")
        for name in ("d_k", "d_v", "d_out"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InputError(f"{name} must be a positive integer, got {value!r}")
        if self.d_k is None and self.d_model % self.heads:
            raise InputError(
                f"d_model={self.d_model} is not divisible by heads={self.heads}; "
                f"choose another head count or set d_k explicitly"
            )
        if self.mask not in MASKS:
            raise InputError(f"unknown mask {self.mask!r}; choose one of {', '.join(MASKS)}")
        if self.score not in SCORES:
            raise InputError(f"unknown score {self.score!r}; choose one of {', '.join(SCORES)}")
        if self.pe not in POSITIONAL:
            raise InputError(
                f"unknown positional encoding {self.pe!r}; choose one of {', '.join(POSITIONAL)}"
            )
        if self.device not in DEVICES:
            raise InputError(f"unknown device {self.device!r}; choose one of {', '.join(DEVICES)}")
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise InputError(f"temperature must be a positive number, got {self.temperature!r}")
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
