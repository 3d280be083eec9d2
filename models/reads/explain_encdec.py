"""The derivation of position-biased scores (stage ``biased``): T5's bucket table, or ALiBi's slope."""

from __future__ import annotations

import numpy as np

from models.reads.derivation import Derivation, Term, num
from models.reads.explain_context import Context, cell_value


def biased(ctx: Context) -> Derivation:
    h, i, j = ctx.cell
    src = "scaled" if "scaled" in ctx.trace else "scores"
    before = cell_value(ctx.trace, src, ctx.cell)
    extra = ctx.params.extra
    if ctx.params.pe == "alibi":
        return _alibi(ctx, src, before)
    if "position_bias" in extra:
        bias = float(np.asarray(extra["position_bias"])[h, i, j])
    else:  # parameters without the table: the difference the trace holds
        bias = float(ctx.value) - before
    bucket = int(np.asarray(extra["bucket"])[i, j]) if "bucket" in extra else None
    where = f"bucket {bucket}" if bucket is not None else "its bucket"
    formula = (f"s_{i},{j} + B_{h}[bucket({j} − {i})] = {num(before, 6)} + {num(bias, 6)} = "
               f"{num(before + bias, 6)}")  # fmt: skip
    steps = [f"Key {j} lies {j - i:+d} positions from query {i}; that distance falls in {where}, and head {h} "
             f"learned the bias {num(bias, 6)} for it (T5's relative position bias, shared by every layer of "
             "the stack).",
             "Near distances get a bucket each; far ones share logarithmically wider buckets, and every distance "
             "past relative_attention_max_distance shares the last one."]  # fmt: skip
    terms = [Term(f"{src}[{h},{i},{j}]", before), Term(f"B_{h}[{where}] (position bias)", bias)]
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Position-biased score"), formula, ctx.value,
                      sum_of=terms, steps=steps, details={"before": before, "bias": bias, "bucket": bucket,
                      "distance": j - i}, bars=terms, bars_caption="score and bias")  # fmt: skip


def _alibi(ctx: Context, src: str, before: float) -> Derivation:
    h, i, j = ctx.cell
    bias = float(ctx.value) - before  # the trace's own: slope_h · j (times the layer's scale)
    formula = f"s_{i},{j} + m_{h} · {j} = {num(before, 6)} + {num(bias, 6)} = {num(before + bias, 6)}"
    steps = [f"Head {h} adds its fixed slope m_{h} times the key's position {j} (ALiBi, scaled with the scores). "
             f"Query {i}'s own m_{h} · {i} would cancel in its softmax, so only the distance counts: every step "
             "back costs the same m_h, the model's only position signal.",
             "The slopes fall geometrically over the heads (2^(−8k/h)): some look far, some near."]  # fmt: skip
    terms = [Term(f"{src}[{h},{i},{j}]", before), Term(f"m_{h} · {j} (ALiBi)", bias)]
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Position-biased score (ALiBi)"), formula, ctx.value,
                      sum_of=terms, steps=steps, details={"before": before, "bias": bias, "distance": j - i},
                      bars=terms, bars_caption="score and bias")  # fmt: skip
