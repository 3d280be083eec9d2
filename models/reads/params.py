"""One traced attention layer's parameters, in one convention for both engines.

The toy engine (models/engine/pipeline.py) keeps per-head weights ``(h, d_model, d_k)``; the pretrained
engine keeps fused matrices ``(d_model, h·d_k)``. :class:`LayerParams` holds either in the toy
engine's form, as float32 numpy, so that models/reads/explain.py can derive any traced cell from the
same numbers the forward pass used. Right-multiplication throughout: ``Q = X W_Q + b``.

Builders import torch lazily: this module itself is numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from models.engine.host import to_numpy
from models.engine.mask_rule import hidden_array

if TYPE_CHECKING:
    from models.config import AttentionRequest
    from models.pretrained.model import PretrainedModel


@dataclass(frozen=True, eq=False)
class LayerParams:
    """Everything needed to recompute one traced layer's cells from its traced inputs."""

    W_q: np.ndarray  # (h, d_model, d_k)
    b_q: np.ndarray | None  # (h, d_k)
    W_k: np.ndarray  # (kv, d_model, d_k)
    b_k: np.ndarray | None  # (kv, d_k)
    W_v: np.ndarray  # (kv, d_model, d_v)
    b_v: np.ndarray | None  # (kv, d_v)
    W_o: np.ndarray  # (h·d_v, d_out)
    b_o: np.ndarray | None  # (d_out,)
    head_groups: tuple[int, ...]  # query head -> the key/value head it reads
    score: str = "scaled"  # "dot" | "scaled" | "general" | "additive"
    scale: float | None = None  # the multiplier applied to scores; None: no scaled stage
    scale_formula: str = ""  # e.g. "S / √d_k"
    temperature: float = 1.0
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # W_g; W_1, W_2, w
    rope: tuple[np.ndarray, np.ndarray] | None = None  # cos, sin: (n, rotary dims)
    pe: str = "none"  # "none" | "sinusoidal" | "learned" | "rotary"
    mask: str = "none"  # "none" | "causal" | "padding" | "custom"
    pad_positions: tuple[int, ...] = ()
    custom_mask: np.ndarray | None = None  # (n_q, n_k) bool, True = hidden
    # Where the input rows come from: token ids (None for rows read from a file) and the source.
    key_ids: tuple[int, ...] | None = None
    query_ids: tuple[int, ...] | None = None
    vocab_size: int | None = None
    source: str = "table"  # keys' rows: "table" (each word's seeded vector), "file", or "model"
    query_source: str = "table"  # the same for the queries' rows (cross-attention)
    # Cross-attention: the query rows before the positional encoding (the trace keeps only X_q + P).
    query_embeddings: np.ndarray | None = None  # (n_q, d_model)
    # Optional refinements of newer families (None when absent); explained when present.
    q_norm: Any = None
    k_norm: Any = None
    softcap: float | None = None
    sliding_window: int | None = None
    rotary_dim: int | None = None
    rope_interleaved: bool = False  # RoPE pairs (2j, 2j + 1) (Cohere), not (j, j + r/2)
    band: int | None = None  # two-sided local window (ModernBERT): keys |i − j| > band hidden
    sinks: np.ndarray | None = None  # (h,) learned sink logits (gpt-oss): one more key column, last

    @property
    def heads(self) -> int:
        return self.W_q.shape[0]

    @property
    def kv_heads(self) -> int:
        return self.W_k.shape[0]

    @property
    def d_k(self) -> int:
        return self.W_q.shape[2]

    @property
    def d_v(self) -> int:
        return self.W_v.shape[2]

    def hidden(self, n_q: int, n_k: int) -> np.ndarray:
        """``(n_q, n_k)`` bool, True where the mask hides key j from query i."""
        return hidden_array(
            n_q, n_k, causal=self.mask == "causal", window=self.sliding_window or None, band=self.band,
            pads=self.pad_positions if self.mask in ("padding", "causal") else (),
            custom=self.custom_mask if self.mask == "custom" else None,
        )  # fmt: skip


def as_f32(a) -> np.ndarray | None:
    if a is None:
        return None
    if hasattr(a, "detach"):  # a torch tensor
        a = to_numpy(a)
    return np.asarray(a, dtype=np.float32)


def toy_params(req: AttentionRequest) -> LayerParams:
    """The parameters :func:`models.engine.pipeline.run` uses for ``req`` (same seeded weights)."""
    from models.engine.pipeline import sequence_of
    from models.engine.tokenize import check_embeddings, embed_words
    from models.engine.weights import complete_weights, seeded_weights

    cfg = req.config.validate()
    w = complete_weights(cfg, req.weights) if req.weights is not None else seeded_weights(cfg)
    key_tokens, key_matrix = sequence_of(req, cross=False)
    query_tokens, query_matrix = sequence_of(req, cross=True) if req.is_cross else (key_tokens, key_matrix)
    scale = 1.0 / np.sqrt(cfg.head_dim_k) if cfg.score == "scaled" else None
    x_q = None
    if req.is_cross and query_matrix is not None:
        x_q = check_embeddings(to_numpy(query_matrix), cfg.d_model, cfg.max_tokens, "query embeddings")
    elif req.is_cross:  # the same seeded word vectors the pipeline uses
        x_q = to_numpy(embed_words([list(query_tokens)], cfg.d_model, cfg.seed)[0])
    return LayerParams(
        W_q=as_f32(w.W_q), b_q=as_f32(w.b_q), W_k=as_f32(w.W_k), b_k=as_f32(w.b_k),
        W_v=as_f32(w.W_v), b_v=as_f32(w.b_v), W_o=as_f32(w.W_o), b_o=as_f32(w.b_o),
        head_groups=tuple(range(cfg.heads)), score=cfg.score, scale=scale,
        scale_formula="S / √d_k" if scale is not None else "", temperature=cfg.temperature,
        extra={k: as_f32(v) for k, v in w.extra.items()}, pe=cfg.pe, mask=cfg.mask,
        pad_positions=tuple(cfg.pad_positions),
        custom_mask=None if req.custom_mask is None else np.asarray(req.custom_mask, dtype=bool),
        source="table" if key_matrix is None else "file",
        query_source="table" if query_matrix is None else "file", query_embeddings=x_q,
    )  # fmt: skip


def per_head(w, heads: int) -> np.ndarray:
    """Fused ``(d_model, heads·d)`` -> per-head ``(heads, d_model, d)``."""
    w = as_f32(w)
    d_model = w.shape[0]
    return np.ascontiguousarray(w.reshape(d_model, heads, -1).transpose(1, 0, 2))


def bias_per_head(b, heads: int) -> np.ndarray | None:
    return None if b is None else as_f32(b).reshape(heads, -1)


def pretrained_params(
    model: PretrainedModel, layer: int, n: int, mask: str | None = None, pad_positions=()
) -> LayerParams:
    """Layer ``layer`` of a loaded model for an ``n``-token sentence, from ``arch.attention_params``.

    ``mask``/``pad_positions`` as given to ``model.trace`` (None: the model's own mask).
    """
    p = model.arch.attention_params(layer, n)
    h, kv = p.heads, p.kv_heads
    rope = None if p.rope is None else (as_f32(p.rope[0]), as_f32(p.rope[1]))
    mode = model.default_mask if mask is None else mask
    return LayerParams(
        W_q=per_head(p.w_q, h), b_q=bias_per_head(p.b_q, h),
        W_k=per_head(p.w_k, kv), b_k=bias_per_head(p.b_k, kv),
        W_v=per_head(p.w_v, kv), b_v=bias_per_head(p.b_v, kv),
        W_o=as_f32(p.w_o), b_o=as_f32(p.b_o), head_groups=tuple(p.head_groups),
        score="scaled", scale=float(p.scale), scale_formula=p.scale_formula,
        rope=rope, pe=p.pe(model.arch.rotary),
        mask=mode, pad_positions=tuple(sorted(set(pad_positions))) if mode != "none" else (),
        vocab_size=model.arch.vocab_size, source="model", query_source="model",
        q_norm=getattr(p, "q_norm", None), k_norm=getattr(p, "k_norm", None),
        softcap=getattr(p, "softcap", None), sliding_window=getattr(p, "sliding_window", None),
        rotary_dim=getattr(p, "rotary_dim", None), rope_interleaved=getattr(p, "rope_interleaved", False),
        band=p.band, sinks=as_f32(p.sinks),
    )  # fmt: skip
