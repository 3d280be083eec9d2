"""Shared pieces of the pretrained-model engine: errors, weights access, masks and attention.

Every architecture (BERT, GPT-2, LLaMA) runs its layers through :func:`attention` below, and the
trace of layer L records the intermediate tensors of that very same function. So what the viewer
shows is exactly what the forward pass computed, not a re-implementation beside it.

Conventions: one sentence at a time (no batch axis), float32, right-multiplication
(``Q = X W_q + b_q`` with ``W_q`` of shape ``(d_model, h*d_k)``) like models/config.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from models.checks import short
from models.config import InputError
from models.engine import attention as att
from models.engine import pairs
from models.engine.attend import Alibi, Variant, attend, attend_blocks
from models.engine.masks import MaskSpec
from models.pretrained.batching import folded_linear, in_batch
from models.pretrained.checkpoint import Weights  # noqa: F401 - the families import it from here
from models.pretrained.rope import apply_rope

MASK_MODES = ("none", "causal", "padding")


# --- small numerical helpers -------------------------------------------------------------------


def _gelu_tanh(x: Tensor) -> Tensor:
    # OpenAI GPT-2's gelu ("gelu_new"); written exactly as transformers does to match bit-for-bit.
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
    return 0.5 * x * (1.0 + torch.tanh(inner))


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_fast": _gelu_tanh,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


def activation(name: str) -> Callable[[Tensor], Tensor]:
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise InputError(
            f"unsupported activation {short(name)} in config.json; "
            f"supported: {', '.join(ACTIVATIONS)}"
        )
    return ACTIVATIONS[name]


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def rms_norm(x: Tensor, weight: Tensor, eps: float, plus_one: bool = False) -> Tensor:
    """RMSNorm: scale by 1/rms(x), no centring, no bias; times ``weight`` (LLaMA) or
    ``1 + weight`` (Gemma, whose checkpoints store the offset from 1)."""
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return normed * (1.0 + weight) if plus_one else weight * normed


def linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """``x @ w + b`` with ``w`` of shape (in, out); under :func:`~models.pretrained.batching.batched`
    the same product for every text of a batch (vmap would otherwise split the fused ``addmm``)."""
    if in_batch():
        return folded_linear(x, w, b)
    return x @ w if b is None else torch.addmm(b, x, w)


# --- config ------------------------------------------------------------------------------------


MAX_CONFIG_INT = 2**31 - 1  # sizes beyond this do not fit the tensors' indices
MAX_LAYERS = 100_000  # far beyond any model; 10**8 layers took 11.7 GB before being refused


def config_int(cfg: dict, *names: str, default: int | None = None) -> int:
    """The first of ``names`` present in config.json, as a positive int (a layer count at most
    :data:`MAX_LAYERS`, any other size at most 2**31-1: refused before anything is built for it)."""
    for name in names:
        if cfg.get(name) is not None:
            value = cfg[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"config.json: {name} must be a positive integer, got {short(value)}")
            limit = MAX_LAYERS if "layer" in name else MAX_CONFIG_INT
            if value > limit:
                raise InputError(f"config.json: {name} {short(value)} is beyond what any model has (at most {limit:,})")
            return value
    if default is not None:
        return default
    raise InputError(f"config.json lacks {names[0]!r}")


# --- masks -------------------------------------------------------------------------------------


def hidden_mask(n: int, mode: str, pad_positions: tuple[int, ...], device: torch.device) -> Tensor:
    """``(n, n)`` bool, True where query row i may NOT see key column j.

    "padding" hides the pad key columns; "causal" hides the future and, like a decoder given an
    attention_mask, the pad columns too; "none" hides nothing.
    """
    spec = MaskSpec(causal=mode == "causal", pads=tuple(pad_positions) if mode != "none" else ())
    hidden = spec.rows(0, n, n, device)  # the one mask builder, as the traced layer's stages use it
    return torch.zeros(n, n, dtype=torch.bool, device=device) if hidden is None else hidden


def layer_mask(n: int, mode: str, pad_positions: tuple[int, ...], device: torch.device) -> Tensor | MaskSpec:
    """What every layer hides: :func:`hidden_mask`'s ``(n, n)`` bool, or, for a long input (more than
    :data:`models.engine.pairs.LONG_CELLS` cells, where the traced layer keeps its rows' statistics
    instead of the map), its description: the layers then run without any n × n tensor
    (:func:`models.engine.attend.attend_blocks`, issue 34)."""
    if n * n <= pairs.LONG_CELLS:
        return hidden_mask(n, mode, pad_positions, device)
    return MaskSpec(causal=mode == "causal", pads=tuple(pad_positions) if mode != "none" else ())


# --- attention ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadNorm:
    """The norm of every head's q (or k) vector before the rotation (qk-norm), in the three forms
    the families use (:attr:`kind`):

    - ``"rms"``: an RMS norm over one head's d_k features (Qwen3, Gemma), weight ``(d_k,)``;
    - ``"layer"``: a LayerNorm without bias over one head's d_k features, each head with its own
      weight ``(heads, d_k)`` (StableLM, Cohere): ``(x − mean) / √(var + ε) · w_head``;
    - ``"rms_all"``: an RMS norm over all heads' features of a token at once, weight
      ``(heads·d_k,)`` (OLMo 2 norms the whole q and k projections before splitting the heads).
    """

    weight: Tensor  # (d_k,), (heads, d_k) or (heads·d_k,): see kind
    eps: float
    plus_one: bool = False  # Gemma style: multiply by (1 + weight) instead of weight
    centred: bool = False  # LayerNorm: subtract each vector's mean first
    whole: bool = False  # over the whole projection (all heads of a token), not per head

    @property
    def kind(self) -> str:
        return "rms_all" if self.whole else ("layer" if self.centred else "rms")

    def __call__(self, x: Tensor) -> Tensor:  # x: (heads, n, d_k)
        heads, n, dk = x.shape
        if self.whole:  # as the model does it: on the (n, heads·d_k) projection, then split
            flat = x.transpose(0, 1).reshape(n, heads * dk)
            return rms_norm(flat, self.weight, self.eps, self.plus_one).view(n, heads, dk).transpose(0, 1)
        w = self.weight[:, None, :] if self.weight.dim() == 2 else self.weight  # (heads, 1, d_k) | (d_k,)
        if self.centred:
            mean = x.mean(-1, keepdim=True)
            var = (x - mean).pow(2).mean(-1, keepdim=True)
            return w * ((x - mean) * torch.rsqrt(var + self.eps))
        return rms_norm(x, w, self.eps, self.plus_one)


@dataclass(frozen=True)
class HeadLayerNorm:
    """A LayerNorm (centred, with bias) of every head's q (or k) vector over its d_k features
    (Phi-2's ``qk_layernorm``); read like :class:`HeadNorm` by the trace and the explainer."""

    weight: Tensor  # (d_k,)
    bias: Tensor | None  # (d_k,)
    eps: float
    plus_one = False
    kind = "layer_bias"  # HeadNorm.kind "layer" has no bias and per-head weights

    def __call__(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


FLOAT32_MAX = 3.4028234663852886e38


def check_norm_input(x: Tensor, norm: HeadNorm | HeadLayerNorm, side: str) -> None:
    """Refuse q or k ``(heads, n, d_k)`` whose qk-norm's mean square leaves float32: the norm would
    divide by ∞ and make them 0 (a head's weights uniform, as transformers computes it), although the
    norm of a large vector is well defined. One reduction when no square can overflow (the rule).
    Under vmap (a batch of texts) nothing is read here: the batch's recorded q and k are checked after
    it (:func:`check_recorded_norms`)."""
    if x.numel() == 0 or in_batch():
        return
    lo, hi = (float(v) for v in torch.aminmax(x))
    big = max(abs(lo), abs(hi))
    whole = getattr(norm, "whole", False)
    width = x.shape[-1] * (x.shape[0] if whole else 1)
    if math.isfinite(big) and big * big * width < FLOAT32_MAX / 2:
        return
    flat = x.transpose(0, 1).reshape(x.shape[1], -1) if whole else x  # the features the norm averages over
    if isinstance(norm, HeadLayerNorm) or getattr(norm, "centred", False):
        flat = flat - flat.mean(-1, keepdim=True)
    if bool(torch.isfinite(flat.pow(2).mean(-1)).all()):
        return
    what = "queries" if side == "q" else "keys"
    raise InputError(f"the {what} overflow float32 in their qk-norm (largest |{side}| {big:.3g}: the mean of their "
                     f"squares is beyond float32, which would make them 0 and every weight uniform); scale the "
                     f"inputs or weights down")  # fmt: skip


def check_recorded_norms(record: dict[str, Tensor], p: AttentionParams) -> None:
    """:func:`check_norm_input` for the q and k a layer recorded, ``(heads, n, d_k)`` or a batch of them."""
    for side, norm in (("q", p.q_norm), ("k", p.k_norm)):
        if norm is not None and side in record:
            x = record[side]
            for one in x if x.dim() == 4 else [x]:
                check_norm_input(one, norm, side)


@dataclass
class AttentionParams:
    """One layer's attention, in right-multiplication form.

    The order of operations (:func:`attention`; a lazy trace recomputing one head's stages must
    follow it exactly), with x the layer input ``(n, d_model)``:

    1. ``q, k, v = x W_q + b_q, x W_k + b_k, x W_v + b_v`` split into heads: q ``(h, n, d_k)``,
       k and v ``(kv, n, d_k)``.
    2. ``q, k = q_norm(q), k_norm(k)`` when given (stages ``q_normed``/``k_normed``): RMS norm of
       each head's vector over its d_k features, ``x / rms(x) · w`` (or ``· (1 + w)``), or one of
       the other forms of :class:`HeadNorm` (per-head LayerNorm, RMS over the whole projection).
    3. ``q, k = RoPE(q), RoPE(k)`` when ``rope`` is given (stages ``q_rotated``/``k_rotated``);
       only the first ``rotary_dim`` features of each head rotate, the rest pass unchanged; the
       rotated pairs are (j, j + r/2), or (2j, 2j + 1) with ``rope_interleaved``.
    4. grouped-query: key/value head ``g = i // (h / kv)`` serves query head i (``head_groups``).
    5. ``scores = q kᵀ`` ``(h, n, n)``; ``scaled = scores · scale``; with ALiBi (``alibi``)
       ``biased = scaled + scale · slope_h · j`` for key position j (stage ``biased``).
    6. ``softcapped = c · tanh(scaled / c)`` when ``softcap = c`` is given (stage ``softcapped``).
    7. ``masked``: −∞ where the mask hides a key, the mask being the given one (causal/padding)
       OR'ed with the sliding window (``i − j ≥ sliding_window`` hidden) when given, or with the
       two-sided local window (``|i − j| > band`` hidden, ModernBERT) when ``band`` is given.
    8. ``weights = softmax(masked)`` per row (an all-hidden row gets zeros); with learned attention
       sinks (gpt-oss) every row's softmax has one more logit, the head's ``sinks[h]``, as a last
       key column "sink" with no value: ``weights = softmax([masked, s_h])`` ``(h, n, n + 1)``, and
       the real keys' weights sum to ``1 − weights[..., n]``;
       ``head_output = weights · v_g`` ``(h, n, d_k)``; ``concat`` ``(n, h·d_k)``;
       ``output = concat W_o + b_o`` ``(n, d_model)``.
    """

    w_q: Tensor  # (d_model, h*d_k)
    b_q: Tensor | None  # (h*d_k,)
    w_k: Tensor  # (d_model, kv*d_k)
    b_k: Tensor | None
    w_v: Tensor  # (d_model, kv*d_k)
    b_v: Tensor | None
    w_o: Tensor  # (h*d_k, d_model)
    b_o: Tensor | None  # (d_model,)
    heads: int
    kv_heads: int
    d_k: int
    scale: float  # scaled = scores * scale
    scale_formula: str  # e.g. "S / √d_k"
    rope: tuple[Tensor, Tensor] | None = None  # cos, sin: (n, rotary_dim)
    q_norm: HeadNorm | None = None  # step 2, on every query head
    k_norm: HeadNorm | None = None  # step 2, on every key head
    softcap: float | None = None  # step 6: c in c·tanh(S/c)
    sliding_window: int | None = None  # step 7: query i sees keys j with i − j < sliding_window
    rope_interleaved: bool = False  # step 3: rotate pairs (2j, 2j+1) (Cohere), not (j, j + r/2)
    band: int | None = None  # step 7, two-sided: query i sees keys j with |i − j| ≤ band
    sinks: Tensor | None = None  # step 8: (h,) learned sink logits, one extra softmax column
    alibi: Alibi | None = None  # step 5: biased = scaled + slope_h · key position (ALiBi)

    @property
    def head_groups(self) -> tuple[int, ...]:
        """For each query head, the key/value head it reads (GQA: ``i // (h / kv)``)."""
        rep = self.heads // self.kv_heads
        return tuple(i // rep for i in range(self.heads))

    def variant(self, causal: bool = False, pads: tuple[int, ...] = (), n: int | None = None) -> Variant:
        """This layer's attention as data (steps 5–8), made here only: the one function and the lazy store
        read nothing else. ``causal``, ``pads``: the sequence's mask; ``n``: its length, a sliding window
        or band that hides nothing in ``n`` tokens left out (no mask built for it)."""
        window, band = self.sliding_window, self.band
        if n is not None:
            window = window if window is not None and window < n else None
            band = band if band is not None and band < n - 1 else None
        return Variant(scale=float(self.scale), softcap=self.softcap, causal=causal, window=window, band=band,
                       pads=tuple(pads), sinks=self.sinks, alibi=self.alibi)  # fmt: skip

    def pe(self, rotary_family: bool) -> str:
        """How positions reach this layer's scores: "rotary", "alibi", "none" (a rotary family's layer
        without it, SmolLM3's NoPE) or "learned" (added to the embeddings)."""
        if self.rope is not None or self.alibi is not None:
            return "rotary" if self.rope is not None else "alibi"
        return "none" if rotary_family else "learned"

    @property
    def rotary_dim(self) -> int | None:
        """How many of each head's d_k features rotate (None: no rotary positions)."""
        return None if self.rope is None else self.rope[0].shape[-1]


def split_heads(x: Tensor, heads: int) -> Tensor:
    n = x.shape[0]
    return x.view(n, heads, -1).transpose(0, 1)  # (heads, n, d_k)


def project_qkv(
    x: Tensor,
    p: AttentionParams,
    record: dict[str, Tensor] | None = None,
    override: Callable[[str, Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Steps 1–3 of :class:`AttentionParams`: q ``(h, n, d_k)``, k, v ``(kv, n, d_k)``, after any
    qk-norm and rotation; ``record`` gets every intermediate under its stage name.
    ``override(stage name, tensor) -> tensor``: what-if edits (models/pretrained/edits.py) replace
    a stage's value before it is recorded and before the next step reads it."""
    ed = override or (lambda _name, t: t)
    q = ed("q", split_heads(linear(x, p.w_q, p.b_q), p.heads))  # (h, n, d_k)
    k = ed("k", split_heads(linear(x, p.w_k, p.b_k), p.kv_heads))  # (kv, n, d_k)
    v = ed("v", split_heads(linear(x, p.w_v, p.b_v), p.kv_heads))  # (kv, n, d_k)
    if record is not None:
        record.update(q=q, k=k, v=v)
    if p.q_norm is not None:
        check_norm_input(q, p.q_norm, "q")
        q = p.q_norm(q)
    if p.k_norm is not None:
        check_norm_input(k, p.k_norm, "k")
        k = p.k_norm(k)
    if p.q_norm is not None or p.k_norm is not None:
        q, k = ed("q_normed", q), ed("k_normed", k)
        if record is not None:
            record.update(q_normed=q, k_normed=k)
    if p.rope is not None:
        cos, sin = p.rope
        pairs = p.rope_interleaved
        q = ed("q_rotated", apply_rope(q, cos, sin, pairs))
        k = ed("k_rotated", apply_rope(k, cos, sin, pairs))
        if record is not None:
            record.update(q_rotated=q, k_rotated=k)
    return q, k, v


def attention(
    x: Tensor, p: AttentionParams, hidden: Tensor | MaskSpec, record: dict[str, Tensor] | None = None,
    cache=None,
) -> Tensor:
    """Multi-head (or grouped-query) self-attention of ``x (n, d_model)``; returns (n, d_model).

    ``cache``: a :class:`models.pretrained.kv_cache.LayerKV` when generating: ``x`` holds only
    the new tokens, their keys and values join the cached ones, ``hidden`` is not used (causal,
    plus the layer's variant) and the new rows' weights are kept on the cache.

    The steps are those listed in :class:`AttentionParams`; the attention itself is the one
    function :func:`models.engine.attend.attend`, with the layer's :meth:`AttentionParams.variant`.
    When ``record`` is a dict, every intermediate tensor is stored in it under its stage name;
    without it (the layers below the traced one) the fused kernel runs where it can. ``hidden`` a
    :class:`MaskSpec` (a long input, :func:`layer_mask`): no record, and no n × n tensor anywhere.
    """
    if cache is not None:
        return cache.attend(x, p)
    q, k, v = project_qkv(x, p, record)
    if isinstance(hidden, MaskSpec):
        assert record is None, "a long input's layers keep no n × n stage"
        head_output = attend_blocks(q, k, v, p.variant(), hidden)
    else:
        head_output, _ = attend(q, k, v, p.variant(), hidden=hidden, record=record,
                                weights=record is not None, eager=not in_batch())  # fmt: skip
    concat = att.concat_heads(head_output)  # (n, h*d_k)
    output = linear(concat, p.w_o, p.b_o)  # (n, d_model)
    if record is not None:
        record.update(concat=concat, output=output)
    return output
