"""Derivations of the value-weighted stages: ``value_norms`` ‖f_h(x_j)‖ and ``weighted_norms``
‖a_ij f_h(x_j)‖ (Kobayashi et al., 2020), from the traced values and the layer's W_O, in float64."""

from __future__ import annotations

import math

import numpy as np

from models.reads.derivation import Derivation, Term, num
from models.reads.explain_context import F64, Context


def transformed_value(ctx: Context, h: int, j: int) -> np.ndarray:
    """``f_h(x_j) = v_g(h),j W_O^h`` (d_out,) float64: the traced value row (x_j W_V + b_V) times the
    d_v rows of W_O that head h feeds."""
    v = ctx.trace["v"].array[ctx.group(h), j].astype(F64)  # (d_v,)
    d_v = v.shape[0]
    return v @ ctx.params.W_o.astype(F64)[h * d_v : (h + 1) * d_v]  # (d_out,)


def value_norms(ctx: Context) -> Derivation:
    h, j = ctx.cell
    f = transformed_value(ctx, h, j)
    squares = float(np.sum(f * f))
    d_v = ctx.trace["v"].shape[-1]
    formula = (f"‖f_{h}(x_{j})‖ = √(Σ_c f_c²) = √{num(squares, 6)} = {num(math.sqrt(squares), 6)}")
    steps = [f"f_{h}(x_{j}) = v_{j} W_O^{h}: key {ctx.ktok(j)}'s value row (x_{j} W_V + b_V, stage 'v') times rows "
             f"{h * d_v}..{(h + 1) * d_v - 1} of W_O, the rows head {h} feeds; its {f.size} components are the bars.",
             "This is what head " f"{h} would add to the output for a query that attends to key {j} alone; the "
             "weighted norm multiplies it by the weight."] + ctx.head_note(h)  # fmt: skip
    bars = [Term(f"f_{h}(x_{j})[{c}]", float(x)) for c, x in enumerate(f)]
    return Derivation(ctx.stage, ctx.cell, f"Value norm · head {h} · key {ctx.ktok(j)}", formula, ctx.value,
                      steps=steps, details={"squares_sum": squares, "norm": math.sqrt(squares)}, bars=bars,
                      bars_caption=f"the components of f_{h}(x_{j}) = v_{j} W_O^{h}")  # fmt: skip


def weighted_norms(ctx: Context) -> Derivation:
    h, i, j = ctx.cell
    if ctx.is_sink(j):  # gpt-oss's learned sink: a share of the softmax, but no value vector to move
        a = float(ctx.trace["weights"].rows(h, i, i + 1)[0, j])
        return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Weighted norm of the sink"),
                          f"‖a_{i},sink · 0‖ = 0  (a_{i},sink = {num(a, 6)})", ctx.value,
                          sum_of=[Term("the sink has no value vector", 0.0)],
                          steps=[f"The sink takes {num(a, 4)} of row {i}'s weight and moves nothing: it has no "
                                 "value row, so the head's output is made of the real keys' values only."],
                          details={"weight": a, "value_norm": 0.0, "sink": True})  # fmt: skip
    a_row = ctx.trace["weights"].rows(h, i, i + 1)[0].astype(F64)  # (n_k,)
    a = float(a_row[j])
    norm = float(np.linalg.norm(transformed_value(ctx, h, j)))
    row = ctx.trace["weighted_norms"].rows(h, i, i + 1)[0].astype(F64)  # (n_k,)
    term = Term(f"a_{i},{j} · ‖f_{h}(x_{j})‖", a * norm, (a, norm))
    formula = (f"‖a_{i},{j} f_{h}(x_{j})‖ = a_{i},{j} · ‖f_{h}(x_{j})‖ = {num(a, 6)} × {num(norm, 6)} = "
               f"{num(a * norm, 6)}")  # fmt: skip
    share_w = a / a_row.sum() if a_row.sum() > 0 else 0.0
    share_n = row[j] / row.sum() if row.sum() > 0 else 0.0
    steps = ["A weight is never negative, so the length of the weighted vector is the weight times the length "
             f"of f_{h}(x_{j}) = (x_{j} W_V + b_V) W_O^{h} (stage 'value_norms').",
             f"Key {j} gets {100 * share_w:.1f}% of row {i}'s weight but {100 * share_n:.1f}% of what the row "
             "moves (the sum of its weighted norms)."] + ctx.head_note(h)  # fmt: skip
    bars = [Term(f"‖a_{i},{l} f(x_{l})‖", float(x)) for l, x in enumerate(row)]  # noqa: E741
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Weighted norm"), formula, ctx.value, sum_of=[term],
                      steps=steps, details={"weight": a, "value_norm": norm, "weight_share": share_w,
                                            "norm_share": share_n},
                      bars=bars, bars_caption="the row's weighted norms", focus_bar=j,
                      bar_ticks=list(ctx.trace.key_tokens))  # fmt: skip
