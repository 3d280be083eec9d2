"""Derivations of the steps only some models have: rotary positions, per-head q/k norms (RMS or
LayerNorm), soft-capping, learned attention sinks."""

from __future__ import annotations

import math

import numpy as np

from models.engine.host import to_numpy
from models.reads.derivation import Derivation, Term, num
from models.reads.explain_context import F64, Context, cell_value, sum_terms


def normed(ctx: Context, which: str) -> Derivation:
    """q̂ / k̂: one feature of a head's normed vector (qk-norm families), in the norm's own form:
    RMS per head, LayerNorm per head with the head's own weights, or RMS over all heads of the token."""
    h, r, c = ctx.cell
    norm = getattr(ctx.params, f"{which}_norm", None)
    kind = getattr(norm, "kind", "rms")
    if kind == "layer_bias":  # Phi's qk_layernorm: centred, w and b
        return _layer_normed(ctx, which, norm, ctx.a(which)[h, r])
    kind = getattr(norm, "kind", "rms")
    before = ctx.a(which)  # (heads, n, d_k) the vectors before the norm
    row = before[:, r, :].reshape(-1) if kind == "rms_all" else before[h, r]  # what the norm reads
    at = h * before.shape[-1] + c if kind == "rms_all" else c  # the feature's place in that row
    weight = np.asarray(to_numpy(norm.weight), F64) if norm is not None else np.ones_like(row)
    weight = weight[h] if weight.ndim == 2 else weight  # per-head weights (StableLM, Cohere)
    eps = float(norm.eps) if norm is not None else 0.0
    plus_one = bool(norm.plus_one) if norm is not None else False
    factor = (1.0 + weight[at]) if plus_one else weight[at]
    sym = which.upper()
    w = f"(1 + w_{at})" if plus_one else f"w_{at}"
    if kind == "layer":
        mean = float(np.mean(row))
        std = math.sqrt(float(np.mean((row - mean) ** 2)) + eps)
        minus = f"− {num(mean, 6)}" if mean >= 0 else f"+ {num(-mean, 6)}"
        formula = (f"{sym}̂_{r},{c} = ({sym}_{r},{c} − mean) / √(var + ε) · w_{h},{c} = ({num(row[c], 6)} {minus}) / "
                   f"{num(std, 6)} × {num(factor, 6)} = {num((row[c] - mean) / std * factor, 6)}")
        steps = [f"mean and var of head {h}'s {row.size} features of this token; ε = {eps:g}.",
                 f"A LayerNorm without bias, with head {h}'s own weights: every head's query/key is centred "
                 "and has a comparable size."]  # fmt: skip
        details = {"before": float(row[c]), "mean": mean, "std": std, "weight": float(factor), "eps": eps}
    else:
        rms = math.sqrt(float(np.mean(row * row)) + eps)
        over = (f"all {row.size} features of the token's {before.shape[0]} heads" if kind == "rms_all"
                else f"the {row.size} features of head {h}")  # fmt: skip
        formula = (f"{sym}̂_{r},{c} = {sym}_{r},{c} / rms · {w} = {num(row[at], 6)} / {num(rms, 6)} × "
                   f"{num(factor, 6)} = {num(row[at] / rms * factor, 6)}")  # fmt: skip
        steps = [f"rms = √(mean of the squares of {over} + ε) with ε = {eps:g}.",
                 "The norm is taken over the whole projection before it is split into heads (feature "
                 f"{c} of head {h} is feature {at} of it)." if kind == "rms_all" else
                 "The norm is taken over one head's vector, so every head's query/key has a comparable "
                 "size."]  # fmt: skip
        details = {"before": float(row[at]), "rms": rms, "weight": float(factor), "eps": eps}
    tok = ctx.qtok(r) if which == "q" else ctx.ktok(r)
    return Derivation(ctx.stage, ctx.cell, f"{'Normed query' if which == 'q' else 'Normed key'} · head {h} · "
                      f"token {tok} · feature {c}", formula, ctx.value, steps=steps, details=details)  # fmt: skip


def _layer_normed(ctx: Context, which: str, norm, row: np.ndarray) -> Derivation:
    """q̂ / k̂ of a per-head LayerNorm (Phi's qk_layernorm): centred, divided by the std, w and b."""
    h, r, c = ctx.cell
    weight = float(norm.weight[c])
    bias = float(norm.bias[c]) if norm.bias is not None else 0.0
    mean = float(np.mean(row))
    std = math.sqrt(float(np.mean((row - mean) ** 2)) + float(norm.eps))
    sym = which.upper()
    value = (row[c] - mean) / std * weight + bias
    formula = (f"{sym}̂_{r},{c} = ({sym}_{r},{c} − mean) / std · w_{c} + b_{c} = ({num(row[c], 6)} − {num(mean, 6)}) / "
               f"{num(std, 6)} × {num(weight, 6)} + {num(bias, 6)} = {num(value, 6)}")  # fmt: skip
    steps = [f"mean and std over the head's {row.size} features; std = √(variance + ε) with ε = {float(norm.eps):g}.",
             "A LayerNorm per head (qk_layernorm) keeps every head's query/key at a comparable size."]
    tok = ctx.qtok(r) if which == "q" else ctx.ktok(r)
    return Derivation(ctx.stage, ctx.cell, f"{'Normed query' if which == 'q' else 'Normed key'} · head {h} · "
                      f"token {tok} · feature {c}", formula, ctx.value, steps=steps,
                      details={"before": float(row[c]), "mean": mean, "std": std, "weight": weight,
                               "bias": bias, "eps": float(norm.eps)})  # fmt: skip


def sink(ctx: Context) -> Derivation:
    """The sink column of scores, scaled, softcapped or masked: the head's learned sink logit."""
    h, i, j = ctx.cell
    s = float(ctx.params.sinks[h])
    steps = [f"Column {j}, after the {j} keys, is not a key: it is head {h}'s learned attention sink, one logit "
             f"s_{h} the model learned, the same in every row.",
             "It is not a q·k product, and it is neither scaled nor masked: it joins every row's softmax as it is, "
             "so the sink takes a share of each row's weight and, having no value, passes nothing on."]  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Sink logit"), f"S_{i},sink = s_{h} = {num(s, 6)}",
                      ctx.value, sum_of=[Term(f"s_{h} (sink logit)", s)], steps=steps,
                      details={"sink": True, "sink_logit": s})  # fmt: skip


def softcapped(ctx: Context) -> Derivation:
    h, i, j = ctx.cell
    if ctx.is_sink(j):
        return sink(ctx)
    x = cell_value(ctx.trace, "scaled", ctx.cell)
    cap = float(ctx.params.softcap)
    formula = f"{num(cap)} · tanh({num(x, 6)} / {num(cap)}) = {num(cap * math.tanh(x / cap), 6)}"
    steps = [f"Soft-capping squashes the scaled score smoothly into (−{num(cap)}, {num(cap)}): small scores "
             "barely change, large ones saturate."]  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Soft-capped score"), formula, ctx.value,
                      steps=steps, details={"scaled": x, "cap": cap})  # fmt: skip


def rotated(ctx: Context, kind: str) -> Derivation:
    h, i, c = ctx.cell
    source = f"{kind}_normed" if f"{kind}_normed" in ctx.trace else kind  # rotary acts on the normed vector
    x = ctx.a(source)[h, i]  # (d_k,)
    cos, sin = (r.astype(F64) for r in ctx.params.rope)  # (n, r)
    r = cos.shape[1]
    title = f"Rotated {'query' if kind == 'q' else 'key'} · head {h} · token " + (
        ctx.qtok(i) if kind == "q" else ctx.ktok(i)) + f" · feature {c}"  # fmt: skip
    if c >= r:  # partial rotary: the features past rotary_dim pass through
        return Derivation(ctx.stage, ctx.cell, title, f"{kind}'_{i},{c} = {kind}_{i},{c} = {num(ctx.value, 6)}",
                          ctx.value, sum_of=[Term(f"{kind}_{i},{c}", float(x[c]))],
                          steps=[f"Only the first {r} features rotate; feature {c} is copied."])  # fmt: skip
    if getattr(ctx.params, "rope_interleaved", False):  # pairs (2j, 2j + 1)
        pair = c // 2
        partner, sign = (c + 1, -1.0) if c % 2 == 0 else (c - 1, 1.0)
    else:  # pairs (j, j + r/2)
        half = r // 2
        pair = c % half
        partner, sign = (c + half, -1.0) if c < half else (c - half, 1.0)
    ct, st = cos[i, c], sin[i, c]
    terms = [Term(f"{kind}_{i},{c}·cos θ", float(x[c] * ct), (float(x[c]), float(ct))),
             Term(f"{'−' if sign < 0 else '+'}{kind}_{i},{partner}·sin θ", float(sign * x[partner] * st),
                  (float(sign * x[partner]), float(st)))]  # fmt: skip
    omega = math.atan2(sin[1, c], cos[1, c]) if cos.shape[0] > 1 else None
    theta = f"θ = {i}·ω_{pair}" + (f" = {i} × {num(omega, 6)} = {num(i * omega, 6)} rad" if omega is not None else "")
    op = "−" if sign < 0 else "+"
    steps = [f"RoPE turns the feature pair ({min(c, partner)}, {max(c, partner)}) of every {kind} by the angle of "
             f"the token's position: {theta} (cos θ = {num(ct, 6)}, sin θ = {num(st, 6)}).",
             "Lengths are kept; q'·k' then depends only on how far apart the two tokens are."]  # fmt: skip
    formula = (f"{kind}'_{i},{c} = {kind}_{i},{c} cos θ {op} {kind}_{i},{partner} sin θ = "
               f"{num(x[c])}×{num(ct)} {op} {num(x[partner])}×{num(st)} = {num(sum_terms(terms), 6)}")  # fmt: skip
    details = {"position": i, "pair": [min(c, partner), max(c, partner)], "cos": ct, "sin": st,
               "angle": None if omega is None else i * omega}  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, title, formula, ctx.value, sum_of=terms, steps=steps,
                      details=details, bars=terms, bars_caption="the two rotated parts")  # fmt: skip


# --- scores and what follows -----------------------------------------------------------------------
