"""The residual stream of a pretrained model as a sum of named sources, and a head's q and k split by them.

Every norm is affine once its scale (1/σ or 1/rms of the real run's vector) is frozen, so the hidden
state entering layer L is, exactly, a sum of what each part of the model wrote:

- ``embed`` (token and token-type embeddings), ``pos`` (learned positions: BERT, GPT-2, OPT),
  ``embed norm bias`` (an embedding LayerNorm's bias);
- ``L{l} H{h}``: head h of layer l, its output times its own rows of W_O (``head_output[h] W_O^h``),
  times the frozen factor of a norm after the attention (Gemma 2/3, OLMo 2) or a multiplier (Granite);
- ``L{l} attn bias`` (b_O, through the same factor), ``L{l} mlp`` (the MLP or mixture of experts),
  ``L{l} norm bias`` (post-norm blocks: the biases of the LayerNorms after the residual adds).

The traced layer's own input norm bias and projection biases are one more source, ``bias``. Rotary is
linear per position, grouped kv heads read their key head, qk-norms are frozen like the others.

The layers below the traced one run through the engine's own :func:`attention` with its ``record``
(``head_output``), never a second attention; each block's real output is that of the family's
``block``. Every step is checked against the real run (:func:`check_parts`, 1e-5 relative); a family
whose residual wiring :func:`wiring` does not know is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from models.config import InputError
from models.engine.host import to_numpy
from models.pretrained.architecture import Architecture, Wiring
from models.pretrained.common import attention, hidden_mask, project_qkv
from models.pretrained.rope import apply_rope
from models.reads.why_sides import Sides, check_size

CHECK = 1e-5  # every re-assembled tensor equals the real run's to this (relative to its largest entry)


@dataclass
class FrozenNorm:
    """A norm with its per-token scale frozen: ``v ↦ (v − mean v)·s·w`` (LayerNorm) or ``v·s·w`` (RMS);
    its bias (or None) is a source of its own."""

    scale: Tensor  # (n, 1) float64
    weight: Tensor | None  # (d,) float64: w, or 1 + w
    bias: Tensor | None  # (d,) float64
    centred: bool

    def lin(self, v: Tensor, rows) -> Tensor:  # v (..., r, d) at token rows -> the same shape
        if self.centred:
            v = v - v.mean(-1, keepdim=True)
        v = v * self.scale[list(rows)]
        return v if self.weight is None else v * self.weight


def frozen(z: Tensor, kind: str, weight, bias, eps: float, plus_one: bool = False) -> FrozenNorm:
    """The norm ``kind`` ("layer" or "rms") of the real input ``z (n, d)``, its scale frozen."""
    z = z.double()
    if kind == "layer":
        var = (z - z.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True)
    else:
        var = z.pow(2).mean(-1, keepdim=True)
    w = None if weight is None else weight.double() + (1.0 if plus_one else 0.0)
    return FrozenNorm(torch.rsqrt(var + eps), w, None if bias is None else bias.double(), kind == "layer")


# --- the families' residual wiring, as data -------------------------------------------------------


def wiring(arch: Architecture) -> Wiring:
    """The family's residual wiring, data on its class (:class:`models.pretrained.architecture.Wiring`)."""
    if arch.wiring is None:
        raise InputError(f"why: {arch.model_type}: its residual wiring is not known to the split")
    return arch.wiring


def input_norm(arch: Architecture, wire: Wiring, i: int, h: Tensor) -> FrozenNorm | None:
    if wire.input_norm is None:
        return None
    kind, key = wire.input_norm
    value = arch.layers[i][key]
    if value is None:  # ModernBERT's layer 0: no norm
        return None
    weight, bias = value if isinstance(value, tuple) else (value, None)
    return frozen(h, kind, weight, bias, arch.eps, kind == "rms" and getattr(arch, "norm_plus_one", False))


# --- the embedding -------------------------------------------------------------------------------


def _bert_sources(arch, ids: Tensor, r: list[int]) -> tuple[list[str], list[Tensor]]:
    word = arch.word[ids].double()
    if arch.token_types:
        word = word + arch.token_type[torch.zeros_like(ids)].double()
    position = arch.position[arch.position_ids(ids)].double()
    raw = arch.word[ids] + (arch.token_type[torch.zeros_like(ids)] if arch.token_types else 0)
    ln = frozen(raw + arch.position[arch.position_ids(ids)], "layer", *arch.emb_ln, arch.eps)
    return ["embed", "pos", "embed norm bias"], [ln.lin(word[r], r), ln.lin(position[r], r), ln.bias.expand(len(r), -1)]


def _gpt2_sources(arch, ids: Tensor, r: list[int]) -> tuple[list[str], list[Tensor]]:
    pos = torch.arange(ids.shape[0], device=ids.device)
    return ["embed", "pos"], [arch.wte[ids][r].double(), arch.wpe[pos][r].double()]


def _opt_sources(arch, ids: Tensor, r: list[int], h0: Tensor) -> tuple[list[str], list[Tensor]]:
    from models.pretrained import opt

    p = arch.positions[torch.arange(ids.shape[0], device=ids.device) + opt.OFFSET][r].double()
    return ["embed", "pos"], [h0[r].double() - p, p]


def embedding_sources(arch: Architecture, ids: Tensor, rows) -> tuple[list[str], list[Tensor], Tensor]:
    """``embed`` (+ ``pos``, ``embed norm bias``) at ``rows``, each (r, d) float64, and the real h₀; what
    h₀ is made of is data on the family class (``Architecture.embedding``)."""
    h0 = arch.embed(ids, torch.zeros_like(ids))
    r = list(rows)
    if arch.embedding == "bert":
        return (*_bert_sources(arch, ids, r), h0)
    if arch.embedding == "gpt2":
        return (*_gpt2_sources(arch, ids, r), h0)
    if arch.embedding == "opt":
        return (*_opt_sources(arch, ids, r, h0), h0)
    return ["embed"], [h0[r].double()], h0


# --- the layers below ----------------------------------------------------------------------------


def check_parts(parts: Tensor, real: Tensor, what: str) -> None:
    """The sources ``parts (S, r, d)`` must sum to the real tensor ``real (r, d)`` (:data:`CHECK`); else refuse."""
    real = real.double()
    error = float((parts.sum(0) - real).abs().max()) / max(float(real.abs().max()), 1e-30)
    if not error <= CHECK:
        raise InputError(f"why: {what} is not the sum of its sources (relative error {error:.2g}); refusing")


def head_writes(rec: dict, w_o: Tensor, heads: int, rows) -> Tensor:
    """``head_output[h] · W_O^h`` at ``rows``: (heads, r, d) float64."""
    ho = rec["head_output"][:, list(rows)].double()  # (h, r, d_k)
    dk = ho.shape[-1]
    return torch.einsum("hrk,hkd->hrd", ho, w_o.double().reshape(heads, dk, -1))


def residual_sources(arch: Architecture, ids: Tensor, hidden: Tensor, layer: int, rows, states=None):
    """The sources of the hidden state entering ``layer`` at ``rows``: (names, (S, r, d) float64, h_L).
    ``states``: the real hidden states the model kept from this very run (embeddings, each block's output),
    used instead of running each block once more."""
    wire = wiring(arch)
    names, parts, h = embedding_sources(arch, ids, rows)
    parts = torch.stack(parts)
    check_parts(parts, h[list(rows)], "the embedding")
    n = ids.shape[0]
    for i in range(layer):
        p = arch.attention_params(i, n)
        rec: dict[str, Tensor] = {}
        o = attention(arch.attention_input(i, h), p, hidden, record=rec)
        new = head_writes(rec, p.w_o, p.heads, rows)  # (h, r, d)
        new_names = [f"L{i} H{g}" for g in range(p.heads)]
        if p.b_o is not None:
            new = torch.cat([new, p.b_o.double().expand(1, len(rows), -1)])
            new_names.append(f"L{i} attn bias")
        check_parts(new, o[list(rows)], f"layer {i}'s attention output")
        nxt = states[i + 1] if states is not None else arch.block(i, h, hidden)
        if wire.kind == "post":
            parts, names = _post_block(arch, wire, i, h, o, parts, names, new, new_names, rows)
        else:
            if wire.post_attn is not None:
                post = frozen(o, "rms", arch.layers[i][wire.post_attn], None, arch.eps, arch.norm_plus_one)
                new = post.lin(new, rows)
                real = arch.rms(o, arch.layers[i][wire.post_attn])[list(rows)]
                check_parts(new, real, f"layer {i}'s normed attention")
            new = new * float(getattr(arch, "residual_multiplier", 1.0))
            mlp = nxt[list(rows)].double() - h[list(rows)].double() - new.sum(0)
            parts = torch.cat([parts, new, mlp[None]])
            names = names + new_names + [f"L{i} mlp"]
        check_parts(parts, nxt[list(rows)], f"the hidden state after layer {i}")
        h = nxt
    return names, parts, h


def _post_block(arch, wire: Wiring, i: int, h, o, parts, names, new, new_names, rows):
    """``LN₂(LN₁(h + attn) + ffn(·))``: every earlier source through both frozen LayerNorms."""
    from models.pretrained.common import layer_norm, linear

    L = arch.layers[i]
    z1 = o + h
    ln1 = frozen(z1, "layer", *L[wire.norms[0]], arch.eps)
    a = layer_norm(z1, *L[wire.norms[0]], arch.eps)
    m = linear(arch.act(linear(a, *L[wire.ffn[0]])), *L[wire.ffn[1]])
    ln2 = frozen(a + m, "layer", *L[wire.norms[1]], arch.eps)
    r = list(rows)
    both = ln2.lin(ln1.lin(torch.cat([parts, new]), rows), rows)
    bias = ln2.lin(ln1.bias.expand(len(r), -1), rows) + ln2.bias
    parts = torch.cat([both, ln2.lin(m[r].double(), rows)[None], bias[None]])
    return parts, names + new_names + [f"L{i} mlp", f"L{i} norm bias"]


# --- the traced layer's q and k ------------------------------------------------------------------


def _head_norm(norm, vecs: Tensor, real: Tensor, head: int, heads_all: Tensor) -> tuple[Tensor, Tensor | None]:
    """A qk-norm of one head's vectors ``vecs (S, r, d_k)`` frozen at the real ``real (r, d_k)``
    (``heads_all (heads, r, d_k)``: the whole projection, for a norm over all heads); returns the
    normed sources and the norm's bias (or None)."""
    real = real.double()
    kind = norm.kind
    w = norm.weight.double()
    if kind == "rms_all":
        dk = real.shape[-1]
        s = torch.rsqrt(heads_all.double().pow(2).mean((0, -1)) + norm.eps)[:, None]  # (r, 1)
        w = w[head * dk : (head + 1) * dk]
    elif kind == "rms":
        s = torch.rsqrt(real.pow(2).mean(-1, keepdim=True) + norm.eps)
    else:
        centred = real - real.mean(-1, keepdim=True)
        s = torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + norm.eps)
        vecs = vecs - vecs.mean(-1, keepdim=True)
        if kind == "layer" and w.dim() == 2:
            w = w[head]
    if getattr(norm, "plus_one", False):
        w = 1.0 + w
    bias = getattr(norm, "bias", None)
    return vecs * s * w, None if bias is None else bias.double()


def project_sources(arch, wire, layer: int, h: Tensor, hidden: Tensor, names, parts, rows, head: int, side: str):
    """One side's sources in head space at ``rows``: (names, (S, r, d_k) float64), checked against the
    real q (side "q", query head ``head``) or k (side "k", key head ``head``) after norms and rotation."""
    n = h.shape[0]
    p = arch.attention_params(layer, n)
    x = arch.attention_input(layer, h)
    rec: dict[str, Tensor] = {}
    project_qkv(x, p, rec)
    r = list(rows)
    norm = input_norm(arch, wire, layer, h)
    xs = parts if norm is None else norm.lin(parts, rows)  # (S, r, d)
    x_bias = torch.zeros_like(xs[0]) if norm is None or norm.bias is None else norm.bias.expand(len(r), -1)
    check_parts(torch.cat([xs, x_bias[None]]), x[r], f"layer {layer}'s attention input")
    w, b = (p.w_q, p.b_q) if side == "q" else (p.w_k, p.b_k)
    dk = p.d_k
    cols = slice(head * dk, (head + 1) * dk)
    w = w[:, cols].double()
    vecs = torch.cat([xs @ w, (x_bias @ w + (0 if b is None else b[cols].double()))[None]])  # (S + 1, r, d_k)
    head_norm = p.q_norm if side == "q" else p.k_norm
    if head_norm is not None:
        vecs, nb = _head_norm(head_norm, vecs, rec[side][head, r], head, rec[side][:, r])
        if nb is not None:
            vecs[-1] = vecs[-1] + nb
    if p.rope is not None:
        cos, sin = (t[r].double()[None] for t in p.rope)  # (1, r, rotary_dim)
        vecs = apply_rope(vecs, cos, sin, p.rope_interleaved)
    final = rec.get(f"{side}_rotated", rec.get(f"{side}_normed", rec[side]))
    check_parts(vecs, final[head, r], f"layer {layer}'s {side} of head {head}")
    return list(names) + ["bias"], vecs, p


def _sources_of_this_run(model, trace, ids, hidden, layer: int, rows):
    """:func:`residual_sources`, with the hidden states the model kept when they are this trace's (the
    layer's input they give is the trace's own ``input`` stage, exactly); else every block runs again."""
    arch, states = model.arch, model.cached_states
    x = np.asarray(trace["input"].array)
    if len(states) > layer and tuple(states[layer].shape) == (ids.shape[0], arch.hidden_size):
        if np.array_equal(to_numpy(arch.attention_input(layer, states[layer])), x):
            return residual_sources(arch, ids, hidden, layer, rows, states[: layer + 1])
    found = residual_sources(arch, ids, hidden, layer, rows)
    if not np.array_equal(to_numpy(arch.attention_input(layer, found[2])), x):
        raise InputError(f"why: the layers below layer {layer} do not give this trace's input; refusing")
    return found


def pretrained_sides(model, trace, head: int, row: int, cols) -> Sides:
    """The query sources of ``head`` at ``row`` and its key head's sources at ``cols``."""
    arch = model.arch
    if trace.meta.get("edits"):
        raise InputError("why: this run has what-if edits; the split explains the model's own numbers")
    layer = int(trace.config["layer"])
    ids = torch.tensor(trace.meta["token_ids"], dtype=torch.long, device=model.device)
    n = ids.shape[0]
    rows = tuple(sorted({row, *cols}))
    wire = wiring(arch)
    sources = layer * (arch.num_heads + 3) + 4
    check_size(sources, len(rows), arch.hidden_size)
    with torch.no_grad():
        hidden = hidden_mask(n, trace.config["mask"], tuple(trace.config["pad_positions"]), model.device)
        names, parts, h = _sources_of_this_run(model, trace, ids, hidden, layer, rows)
        g = arch.attention_params(layer, n).head_groups[head]
        qn, q, p = project_sources(arch, wire, layer, h, hidden, names, parts, rows, head, "q")
        kn, k, _ = project_sources(arch, wire, layer, h, hidden, names, parts, rows, g, "k")
    at = {j: rows.index(j) for j in rows}
    query = to_numpy(q[:, at[row]])  # (A, d_k)
    keys = to_numpy(k[:, [at[j] for j in cols]].permute(1, 0, 2))  # (n_keys, B, d_k)
    return Sides(tuple(qn), tuple(kn), query, keys, tuple(cols), float(p.scale))
