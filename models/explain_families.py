"""Derivations of the steps only some models have: rotary positions, per-head q/k RMS norms, soft-capping."""

from __future__ import annotations

import math

import numpy as np

from models.derivation import Derivation, Term, num
from models.explain_stages import F64, Context, _pair_title, _sum


def normed(ctx: Context, which: str) -> Derivation:
    """q̂ / k̂: one feature of a head's RMS-normed vector (qk-norm families)."""
    h, r, c = ctx.cell
    norm = getattr(ctx.params, f"{which}_norm", None)
    row = ctx.a(which)[h, r]  # (d_k,) the vector before the norm
    weight = np.asarray(norm.weight.detach().cpu().numpy(), F64) if norm is not None else np.ones_like(row)
    eps = float(norm.eps) if norm is not None else 0.0
    plus_one = bool(norm.plus_one) if norm is not None else False
    factor = (1.0 + weight[c]) if plus_one else weight[c]
    rms = math.sqrt(float(np.mean(row * row)) + eps)
    sym = which.upper()
    w = f"(1 + w_{c})" if plus_one else f"w_{c}"
    formula = (f"{sym}̂_{r},{c} = {sym}_{r},{c} / rms({sym}_{r}) · {w} = {num(row[c], 6)} / {num(rms, 6)} × "
               f"{num(factor, 6)} = {num(row[c] / rms * factor, 6)}")  # fmt: skip
    steps = [f"rms({sym}_{r}) = √(mean of the {row.size} squared features + ε) with ε = {eps:g}.",
             "The norm is taken over one head's vector, so every head's query/key has a comparable size."]
    tok = ctx.qtok(r) if which == "q" else ctx.ktok(r)
    return Derivation(ctx.stage, ctx.cell, f"{'Normed query' if which == 'q' else 'Normed key'} · head {h} · "
                      f"token {tok} · feature {c}", formula, ctx.value, steps=steps,
                      details={"before": float(row[c]), "rms": rms, "weight": float(factor), "eps": eps})  # fmt: skip


def softcapped(ctx: Context) -> Derivation:
    h, i, j = ctx.cell
    x = float(ctx.trace["scaled"].array[ctx.cell])
    cap = float(ctx.params.softcap)
    formula = f"{num(cap)} · tanh({num(x, 6)} / {num(cap)}) = {num(cap * math.tanh(x / cap), 6)}"
    steps = [f"Soft-capping squashes the scaled score smoothly into (−{num(cap)}, {num(cap)}): small scores "
             "barely change, large ones saturate."]  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, _pair_title(ctx, "Soft-capped score"), formula, ctx.value,
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
               f"{num(x[c])}×{num(ct)} {op} {num(x[partner])}×{num(st)} = {num(_sum(terms), 6)}")  # fmt: skip
    details = {"position": i, "pair": [min(c, partner), max(c, partner)], "cos": ct, "sin": st,
               "angle": None if omega is None else i * omega}  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, title, formula, ctx.value, sum_of=terms, steps=steps,
                      details=details, bars=terms, bars_caption="the two rotated parts")  # fmt: skip


# --- scores and what follows -----------------------------------------------------------------------
