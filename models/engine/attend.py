"""The ONE attention function: every caller (the toy's lazy store, every traced layer, the layers
below it, generation with a KV cache, encoder-decoder blocks and the atlas's batches) goes from
q, k, v to the head outputs here, as ``transformers`` has ``eager_attention_forward``.

A family does not write attention: it declares *which* attention it wants as data, a
:class:`Variant` (its scale, soft-cap, causal mask, sliding or two-sided band, learned sinks),
and hands q, k, v with the positions of their first row and column. Causality and bands come
from those positions, never from the matrix being square, so the same call serves a whole
sequence, a block of rows of the lazy store, the new tokens against a KV cache, and decoder
queries against encoder keys.

The steps, each a function of :mod:`models.engine.attention` and each a stage of the catalogue:

``scores = q kᵀ`` → ``scaled`` (× scale, or ÷ divisor) → ``biased`` (+ an additive position
bias: T5's table, ALiBi's slope × key position) → ``softcapped`` (c·tanh(x/c)) → ``masked`` (−∞ where
hidden) → [sink column] →
``weights = softmax(masked / T)`` → ``head_output = weights · v``.

Without weights wanted (the layers below the traced one) the same step runs in torch's fused
``scaled_dot_product_attention`` where it can express the variant. Long inputs keep each row's
softmax statistics of the ``masked`` stage this module computes (:func:`row_statistics`, merged over
blocks of keys by :func:`merge_statistics`; models/engine/long_rows.py), so that any weight is
``exp(log_weights)`` without the map ever being stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from models.engine import attention as att
from models.engine.masks import MaskSpec

# Cells (heads × rows × visible keys) of one block of rows in :func:`attend_blocks`: 4 MiB of float32 scores
# where the variant needs them taken apart (soft-cap, sinks). Blocks of 64 MiB took 5–10× longer (a window of
# 2,048 with sinks, 2 heads, 32,768 tokens: 19.5 s against 2.0 s; 1 and 2 MiB no faster at 16 heads).
BLOCK_CELLS = 1 << 20


def alibi_slopes(heads: int) -> Tensor:
    """ALiBi's slope of each head ``(heads,)`` (Press et al.; transformers' ``build_alibi_tensor``):
    ``2^(−8i/c)`` for i = 1..c, c the largest power of two ≤ heads, then the odd powers of ``2^(−4/c)``."""
    c = 2 ** math.floor(math.log2(heads))
    slopes = torch.pow(torch.tensor(2 ** (-(2 ** -(math.log2(c) - 3)))), torch.arange(1, 1 + c, dtype=torch.int32))
    if c != heads:
        extra = torch.tensor(2 ** (-(2 ** -(math.log2(2 * c) - 3))))
        slopes = torch.cat([slopes, torch.pow(extra, torch.arange(1, 1 + 2 * min(c, heads - c), 2, dtype=torch.int32))])
    return slopes


@dataclass(frozen=True, eq=False)
class Alibi:
    """ALiBi (BLOOM, Falcon-RW): ``biased = scaled + scale · round(slope_h · j)`` for key position j (the
    row's own position drops out of its softmax, so the key's alone is added, as transformers does)."""

    slopes: Tensor  # (h,)
    scale: float = 1.0  # Falcon adds the bias before its 1/√d_k: here after it, times the same factor
    dtype: torch.dtype = torch.float32  # the product's precision (Falcon rounds it to bfloat16)

    def bias(self, k0: int, n_k: int, device: torch.device) -> Tensor:
        """``(h, 1, n_k)`` for the keys at positions ``k0 .. k0 + n_k − 1``."""
        j = torch.arange(k0, k0 + n_k, device=device)
        product = self.slopes.to(device, self.dtype)[:, None] * j  # (h, n_k), in the model's precision
        return (product.to(torch.float32) * self.scale)[:, None, :]

    def head(self, i: int) -> Alibi:
        return replace(self, slopes=self.slopes[i : i + 1])


@dataclass(frozen=True, eq=False)
class Variant:
    """Which attention, as data: every fact of a layer's attention between q, k, v and the weights, and
    nothing else. A family's layer makes it in one place (:meth:`AttentionParams.variant
    <models.pretrained.common.AttentionParams.variant>`), the toy in :func:`models.engine.pipeline.variant`;
    the lazy store (:class:`models.engine.pair_spec.PairSpec`) reads its stages' facts from it."""

    scale: float | None = 1.0  # scaled = scores · scale ... (None: no "scaled" stage, the toy's dot score)
    divide: bool = False  # ... or scores / scale (the notes' S / √d_k, bit for bit)
    softcap: float | None = None  # c in c · tanh(scaled / c)
    causal: bool = False  # key j hidden from query i when j > i (positions, not indices)
    window: int | None = None  # sliding band: hidden when i − j ≥ window
    band: int | None = None  # two-sided local band: hidden when |i − j| > band
    sinks: Tensor | None = None  # (h,) learned sink logits: one more softmax column, no value
    temperature: float = 1.0
    pads: tuple[int, ...] = ()  # key positions hidden from every query
    custom: np.ndarray | None = None  # (n_q, n_k) bool, True = hidden (a painted mask, a what-if edit)
    bias: Tensor | None = None  # (h, n_q, n_k) added after the scale: a position bias (T5), stage "biased"
    alibi: Alibi | None = None  # a bias from the key positions (BLOOM, Falcon-RW), stage "biased"
    score: str = "dot"  # "dot" (also scaled), "general" (W_g) or "additive" (W_1, W_2, w): the toy's kinds
    score_params: dict | None = None  # the general or additive score's weights

    @property
    def factor(self) -> float:
        """The multiplier of the scores (``1 / scale`` when dividing)."""
        if self.scale is None:
            return 1.0
        return 1.0 / self.scale if self.divide else self.scale

    @property
    def biased(self) -> bool:
        """Whether a position bias joins the scores (stage "biased")."""
        return self.bias is not None or self.alibi is not None

    def head(self, i: int, sink: bool = True) -> Variant:
        """The variant of head ``i`` alone (its sink's logit, its slope; ``sink=False``: no sink column)."""
        sinks = None if self.sinks is None or not sink else self.sinks[i : i + 1]
        alibi = None if self.alibi is None else self.alibi.head(i)
        return replace(self, sinks=sinks, alibi=alibi, bias=None if self.bias is None else self.bias[i : i + 1])

    @cached_property
    def mask(self) -> MaskSpec:
        """What this variant hides, as the one mask builder's description (:class:`MaskSpec`)."""
        return MaskSpec(causal=self.causal, window=self.window, band=self.band, pads=self.pads, custom=self.custom)

    def with_mask(self, mask: MaskSpec) -> Variant:
        """This variant hiding what ``mask`` hides instead (an edited mask, a block's own)."""
        return replace(self, causal=mask.causal, window=mask.window, band=mask.band, pads=mask.pads, custom=mask.custom)

    def hidden(self, q0: int, n_q: int, k0: int, n_k: int, device: torch.device) -> Tensor | None:
        """``(n_q, n_k)`` bool, True where query ``q0 + a`` may not see key ``k0 + b``; None when
        this variant hides nothing there."""
        if not self.mask.hides_anything:
            return None
        reach = q0 + n_q - 1 - k0  # the largest i − j; the largest j − i is k0 + n_k − 1 − q0
        if (
            not self.pads and self.custom is None
            and (not self.causal or k0 + n_k - 1 <= q0)
            and (self.window is None or reach < self.window)
            and (self.band is None or max(reach, k0 + n_k - 1 - q0) <= self.band)
        ):  # fmt: skip
            return None  # nothing hidden here (a generated token over its cache): no mask to build
        return self.mask.rows(q0, q0 + n_q, k0 + n_k, device, k0)


def repeat_kv(x: Tensor, heads: int) -> Tensor:
    """Grouped kv heads: ``(kv, n, d)`` -> ``(heads, n, d)``, query head i reading kv head
    ``i // (heads / kv)`` (transformers' ``repeat_kv``)."""
    rep = heads // x.shape[0]
    return x.repeat_interleave(rep, dim=0) if rep > 1 else x


def with_sink(x: Tensor, sinks: Tensor) -> Tensor:
    """``x (h, r, c)`` with one more column, each head's sink logit: ``(h, r, c + 1)``."""
    return torch.cat([x, sinks.to(x.dtype).view(-1, 1, 1).expand(x.shape[0], x.shape[1], 1)], dim=-1)


def _hidden(variant: Variant, q0: int, k0: int, n_q: int, n_k: int, device, extra: Tensor | None):
    own = variant.hidden(q0, n_q, k0, n_k, device)
    if extra is None:
        return own
    return extra if own is None else own | extra


STEPS = ("scaled", "biased", "softcapped", "masked", "weights")  # after the scores, in order


def after_scores(
    scores: Tensor,
    variant: Variant,
    *,
    q0: int = 0,
    k0: int = 0,
    hidden: Tensor | None = None,
    bias: Tensor | None = None,
    upto: str = "weights",
    record: dict[str, Tensor] | None = None,
    eager: bool = True,
    hidden_from: int = 0,
    own: bool = False,
) -> Tensor:
    """The steps from the scores ``(h, n_q, n_k)`` to stage ``upto`` (one of :data:`STEPS`), for
    queries at positions ``q0..`` and keys at ``k0..``: the one place they are written, read by
    :func:`attend` and by the lazy store (:mod:`models.engine.pairs`) block by block. With learned sinks
    the result (and every recorded stage) has the sink's logit as one more, last, column.
    ``hidden`` may cover only the columns ``hidden_from : hidden_from + hidden.shape[-1]`` (nothing
    hidden outside them: a causal block's diagonal square, the lazy store's); it is then applied in
    place there, on this function's own copy of the scores. ``own``: the caller hands the scores over
    (a block of a streamed pass): the scale is applied in place, no copy made."""
    h, n_q, n_k = scores.shape
    if own and record is None:
        x = scores.div_(variant.scale) if variant.divide else scores.mul_(variant.factor)
        scores = None  # nothing of the caller's to keep: the mask goes in place too
    else:
        x = scores / variant.scale if variant.divide else scores * variant.factor
    stages = {"scaled": x}
    if variant.alibi is not None:
        alibi = variant.alibi.bias(k0, n_k, x.device)  # (h, 1, n_k)
        bias = alibi if bias is None else bias + alibi
    if bias is not None and upto != "scaled":
        x = stages["biased"] = x + bias
    if variant.softcap is not None and upto not in ("scaled", "biased"):
        x = stages["softcapped"] = variant.softcap * torch.tanh(x / variant.softcap)
    if upto in ("masked", "weights"):
        if hidden is not None and (hidden_from or hidden.shape[-1] != n_k):  # a narrow mask, in place
            assert variant.hidden(q0, n_q, k0, n_k, x.device) is None, "a narrow mask is the only one"
            if record is not None or x is scores:  # the recorded stage (or the caller's scores) stays
                x = x.clone()
            x[..., hidden_from : hidden_from + hidden.shape[-1]].masked_fill_(hidden, float("-inf"))
            stages["masked"] = x
        else:
            x = stages["masked"] = att.apply_mask(x, _hidden(variant, q0, k0, n_q, n_k, x.device, hidden))
    if variant.sinks is not None:  # the sink column: one more logit per row, with no value
        x = with_sink(x, variant.sinks)
        if record is not None:  # the stages kept (else each a copy of the block for nothing)
            stages = {name: with_sink(t, variant.sinks) for name, t in stages.items()}
    if upto == "weights":
        x = stages["weights"] = att.softmax(x, variant.temperature, eager=eager)  # dead rows: zeros, never NaN
    if record is not None:
        record.update(stages)
    return x


# --- long inputs: each row's softmax statistics instead of its weights ---------------------------
# softmax(masked / T)_j = exp(temper(masked_j − m) − l) with m the row's largest masked score and
# l = log Σ_j exp(temper(masked_j − m)): the softmax's own rule (the maximum first), kept as two numbers
# a row, so that any weight is computed from its score alone (models/engine/long_rows.py).


def row_statistics(masked: Tensor, temperature: float = 1.0, scratch: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``(m, l)`` of the rows of ``masked (..., c)`` (a block of keys of them): ``(..., )`` each.
    A row with every key hidden: ``m = l = −∞`` (its weights 0). ``scratch``: a buffer shaped as
    ``masked`` for the pass's output (a streamed pass reuses one)."""
    m = masked.amax(dim=-1)  # (...,)
    dead = torch.isneginf(m)
    x = masked if temperature == 1.0 else att.temper(masked - m.masked_fill(dead, 0.0)[..., None], temperature)
    # max_j log_softmax(x)_j = −log Σ_j exp(x_j − max x): torch's fused pass, no temporary but its output
    lse = torch.log_softmax(x, dim=-1, out=scratch if scratch is not None and x.dtype == scratch.dtype else None)
    lse = lse.amax(dim=-1).neg_()
    return m, lse.masked_fill_(dead, float("-inf"))


def merge_statistics(m: Tensor, lse: Tensor, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """The statistics of whole rows from those of their blocks of keys, ``m, l (..., blocks)``:
    ``M = max m``, ``L = log Σ_b exp(l_b + temper(m_b − M))``."""
    top = m.amax(dim=-1)  # (...,)
    dead = torch.isneginf(top)
    shift = att.temper(m - top.masked_fill(dead, 0.0)[..., None], temperature)  # ≤ 0; −∞ for a dead block
    total = torch.logsumexp(lse + shift, dim=-1)
    return top, total.masked_fill_(dead, float("-inf"))


def log_weights(masked: Tensor, m: Tensor, lse: Tensor, temperature: float = 1.0, own: bool = False) -> Tensor:
    """``temper(masked − m) − l``: each weight's log for ``masked (r, c)`` and the rows' ``m, l (r,)``
    (−∞ where hidden; a dead row: −∞ everywhere, its weights 0). ``own``: the caller hands ``masked``
    over (a tile of a streamed pass): the same steps done in place, no fresh pages."""
    shift = m.masked_fill(torch.isneginf(m), 0.0)[:, None]
    if own:
        z = att.temper(masked.sub_(shift), temperature).sub_(lse[:, None])
        return torch.nan_to_num_(z, nan=float("-inf"), neginf=float("-inf"))
    z = att.temper(masked - shift, temperature) - lse[:, None]
    return torch.nan_to_num_(z, nan=float("-inf"), neginf=float("-inf"))  # a dead row: −∞ − (−∞)


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    variant: Variant,
    *,
    q0: int = 0,
    k0: int = 0,
    hidden: Tensor | None = None,
    bias: Tensor | None = None,
    record: dict[str, Tensor] | None = None,
    weights: bool = True,
    eager: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """Attention of q ``(h, n_q, d)`` over k ``(kv, n_k, d)``, v ``(kv, n_k, d_v)``.

    Query row a sits at position ``q0 + a``, key column b at ``k0 + b`` (the variant's causal mask
    and bands are built from them). ``hidden (n_q, n_k)`` bool: keys hidden besides the variant's
    own (padding, a custom mask); ``bias (h, n_q, n_k)``: an additive score bias (T5), else the variant's.
    Returns ``(head_output (h, n_q, d_v), weights (h, n_q, n_k [+1 sink]) or None)``; ``record``
    gets every stage under its catalogue name (with a sink, its column last in each).
    ``weights=False`` and no record: the fused kernel where it can express the variant.
    ``eager=False``: under ``torch.func.vmap`` (the atlas's batches), no data-dependent branches.
    """
    h, n_q, _ = q.shape
    n_k = k.shape[1]
    bias = variant.bias if bias is None else bias
    k_all, v_all = repeat_kv(k, h), repeat_kv(v, h)  # (h, n_k, d), (h, n_k, d_v): head i reads i // rep
    fusable = (
        not weights and record is None and variant.softcap is None and variant.sinks is None
        and variant.temperature == 1.0 and bias is None and variant.alibi is None
    )  # fmt: skip
    if fusable:
        mask = _hidden(variant, q0, k0, n_q, n_k, q.device, hidden)
        if mask is None or not bool(mask.all(-1).any()):  # a dead row: the explicit path (zeros, not NaN)
            scale = variant.factor
            keep = None if mask is None or not bool(mask.any()) else ~mask
            out = F.scaled_dot_product_attention(q[None], k_all[None], v_all[None], attn_mask=keep, scale=scale)
            return out[0], None  # (h, n_q, d_v)
    scores = att.dot_scores(q, k_all)  # (h, n_q, n_k)
    stages: dict[str, Tensor] | None = None if record is None else {"scores": scores}
    a = after_scores(scores, variant, q0=q0, k0=k0, hidden=hidden, bias=bias, record=stages, eager=eager)
    out = att.weighted_sum(a[..., :n_k], v_all)  # (h, n_q, d_v): a sink has no value
    if record is not None:
        if variant.sinks is not None:
            stages["scores"] = with_sink(scores, variant.sinks)
        record.update(stages, head_output=out)
    return out, a


def attend_blocks(q: Tensor, k: Tensor, v: Tensor, variant: Variant, keys: MaskSpec) -> Tensor:
    """The head outputs ``(h, n, d_v)`` of one sequence at positions ``0..n−1`` without ever holding an
    ``n × n`` tensor (the layers below the traced one at long inputs, issue 34): no weights.

    ``keys``: what the model's mask hides (causal, pad keys; its window and band are the variant's).
    Plain causal (or unmasked) attention is one call of torch's fused kernel (``is_causal``); any other
    variant (a sliding window, a local band, pad keys, a soft-cap, learned sinks) runs :func:`attend`
    itself, block of rows by block of rows over the keys some row of the block may see (the rest are
    hidden by definition), its mask built for that block alone by the variant and ``keys``."""
    h, n, _ = q.shape
    variant = replace(variant, causal=keys.causal)
    plain = (variant.window is None and variant.band is None and not keys.pads and keys.custom is None
             and variant.softcap is None and variant.sinks is None and variant.temperature == 1.0
             and not variant.biased)  # fmt: skip
    if plain:
        scale = variant.factor
        k_all, v_all = repeat_kv(k, h), repeat_kv(v, h)  # (h, n, d): the CPU kernel has no grouped heads
        out = F.scaled_dot_product_attention(q[None], k_all[None], v_all[None], is_causal=variant.causal, scale=scale)
        return out[0]  # (h, n, d_v)
    seen = MaskSpec(causal=variant.causal, window=variant.window, band=variant.band)
    out = q.new_empty(h, n, v.shape[-1])
    r0 = 0
    while r0 < n:
        rows = max(1, BLOCK_CELLS // (h * n))  # as many rows as fit with every key visible ...
        while rows < n - r0 and h * 2 * rows * _width(seen, r0, r0 + 2 * rows, n) <= BLOCK_CELLS:
            rows *= 2  # ... or more, where a band or window leaves fewer keys to each
        r1 = min(n, r0 + rows)
        c0, c1 = seen.visible_columns(r0, r1, n)
        pads = MaskSpec(pads=keys.pads, custom=keys.custom).rows(r0, r1, n, q.device, c0, c1)  # (r, c) or None
        out[:, r0:r1], _ = attend(q[:, r0:r1], k[:, c0:c1], v[:, c0:c1], variant, q0=r0, k0=c0, hidden=pads,
                                  weights=False)  # fmt: skip
        r0 = r1
    return out


def _width(seen: MaskSpec, r0: int, r1: int, n: int) -> int:
    c0, c1 = seen.visible_columns(r0, min(r1, n), n)
    return max(1, c1 - c0)
