"""One derivation per stage: the cell's formula with its real inputs (see models/reads/explain.py).

Every number comes from the trace's own float32 arrays or the layer's parameters, promoted to
float64, so that the summands add up to the traced value to float32 rounding.
"""

from __future__ import annotations

import math

import numpy as np

from models.reads.derivation import Derivation, Term, num
from models.reads.explain_context import F64, Context, cell_value, products, sum_formula

# --- inputs -----------------------------------------------------------------------------------------


def _pe_term(i: int, c: int, d: int) -> tuple[float, str]:
    """``P[i, c]`` in float64 and its formula with i, j and d filled in."""
    two_j = c - c % 2
    angle = i / 10000.0 ** (two_j / d)
    fn, f = ("sin", math.sin) if c % 2 == 0 else ("cos", math.cos)
    text = f"P[{i},{c}] = {fn}({i} / 10000^({two_j}/{d})) = {fn}({num(angle, 6)}) = {num(f(angle), 6)}"
    return f(angle), text


def _row_bars(row: np.ndarray, sym: str, i: int) -> list[Term]:
    return [Term(f"{sym}[{i},{m}]", float(v)) for m, v in enumerate(row)]


def _token_steps(ctx: Context, i: int, query: bool) -> tuple[list[str], dict]:
    tokens = ctx.trace.query_tokens if query else ctx.trace.key_tokens
    ids = ctx.ids(query)
    source = ctx.params.query_source if query else ctx.params.source
    token = tokens[i]
    details = {"token": token, "position": i}
    if ids is not None:
        details["id"] = ids[i]
    if source == "table":
        seed, d = ctx.trace.config.get("seed"), ctx.trace.config.get("d_model")
        steps = [f"Token '{token}' has its own vector: {d} numbers drawn from N(0, 1) by a generator seeded with "
                 f"the seed ({seed}) and the word alone,",
                 "so the word has this vector in every sentence (models.engine.tokenize.word_vector)."]  # fmt: skip
    elif source == "file":
        steps = [f"Token '{token}' is row {i} of the embeddings file."]
    else:
        idt = f" (id {ids[i]})" if ids is not None else ""
        steps = [f"Token '{token}'{idt} at position {i}."]
    return steps, details


def embeddings(ctx: Context) -> Derivation:
    i, c = ctx.cell
    steps, details = _token_steps(ctx, i, query=False)
    row = ctx.a("embeddings")[i]
    return Derivation(ctx.stage, ctx.cell, f"Embedding · token {ctx.ktok(i)} · feature {c}",
                      f"X[{i},{c}] = Embedding(id)[{c}] = {num(ctx.value, 6)}", ctx.value,
                      steps=steps, details=details, bars=_row_bars(row, "X", i),
                      bars_caption=f"the row X[{i}] of {len(row)} numbers", focus_bar=c)  # fmt: skip


def positional_encoding(ctx: Context) -> Derivation:
    i, c = ctx.cell
    d = ctx.trace[ctx.stage].shape[1]
    _, text = _pe_term(i, c, d)
    two_j = c - c % 2
    steps = [f"Column {c} is the {'sin' if c % 2 == 0 else 'cos'} of pair j = {two_j // 2}: "
             f"ω_j = 1/10000^(2j/d) = {num(10000.0 ** (-two_j / d), 6)}, so position i turns it by i·ω_j.",
             "Later columns have longer periods: nearby positions get similar rows."]  # fmt: skip
    details = {"i": i, "j": two_j // 2, "d": d, "function": "sin" if c % 2 == 0 else "cos"}
    return Derivation(ctx.stage, ctx.cell, f"Positional encoding · position {i} · column {c}", text,
                      ctx.value, steps=steps, details=details)  # fmt: skip


def _input_like(ctx: Context, query: bool) -> Derivation:
    i, c = ctx.cell
    steps, details = _token_steps(ctx, i, query)
    tok = ctx.qtok(i) if query else ctx.ktok(i)
    what = "Query input" if query else "Input"
    title = f"{what} · token {tok} · feature {c}"
    if ctx.params.source == "model":
        steps += [ctx.trace[ctx.stage].description,
                  "Its position is already inside it: " + ("rotary models turn q and k instead (q_rotated, "
                  "k_rotated)." if ctx.params.pe == "rotary" else "no position is added to the tokens: a learned "
                  "bias per relative distance is added to the scores (stage 'biased')." if ctx.params.pe == "relative"
                  else "position embeddings were added to the token's embedding before layer 0.")
                  if ctx.params.pe != "none" else
                  "This layer uses no positions (NoPE): q and k are not rotated; only the causal mask, and what "
                  "the rotary layers below wrote into the hidden state, tell the tokens' positions apart."]  # fmt: skip
        return Derivation(ctx.stage, ctx.cell, title, f"{ctx.trace[ctx.stage].formula}:  x[{i},{c}] = "
                          f"{num(ctx.value, 6)}", ctx.value, steps=steps, details=details,
                          bars=_row_bars(ctx.a(ctx.stage)[i], "x", i), bars_caption=f"the row x[{i}]",
                          focus_bar=c)  # fmt: skip
    if query:
        x = ctx.params.query_embeddings.astype(F64)[i, c]
    else:
        x = float(ctx.a("embeddings")[i, c])
    if ctx.params.pe != "sinusoidal":
        return Derivation(ctx.stage, ctx.cell, title, f"x[{i},{c}] = X[{i},{c}] = {num(ctx.value, 6)}",
                          ctx.value, sum_of=[Term(f"X[{i},{c}]", x)], steps=steps + ["No positional encoding: "
                          "the input is the embedding itself."], details=details)  # fmt: skip
    p, pe_text = _pe_term(i, c, ctx.trace[ctx.stage].shape[1])
    terms = [Term(f"X[{i},{c}] (embedding)", x), Term(f"P[{i},{c}] (position)", p)]
    return Derivation(ctx.stage, ctx.cell, title, f"x[{i},{c}] = X[{i},{c}] + P[{i},{c}] = {num(x, 6)} + "
                      f"{num(p, 6)} = {num(ctx.value, 6)}", ctx.value, sum_of=terms,
                      steps=steps + [pe_text], details=details | {"pe": p})  # fmt: skip


def input_(ctx: Context) -> Derivation:
    return _input_like(ctx, query=False)


def query_input(ctx: Context) -> Derivation:
    return _input_like(ctx, query=True)


# --- projections ------------------------------------------------------------------------------------


def projection(ctx: Context, kind: str) -> Derivation:
    h, i, c = ctx.cell
    p = ctx.params
    W, b = {"q": (p.W_q, p.b_q), "k": (p.W_k, p.b_k), "v": (p.W_v, p.b_v)}[kind]
    rows = "query_input" if kind == "q" and ctx.cross else "input"
    x = ctx.a(rows)[i]  # (d_model,)
    w = W[h].astype(F64)[:, c]  # (d_model,)
    up = kind.upper()
    terms = products([f"x_{i},{m}·W_{up}[{m},{c}]" for m in range(len(x))], x, w)
    bias = Term(f"b_{up}[{c}] (bias)", float(b[h, c])) if b is not None else None
    all_terms = terms + ([bias] if bias else [])
    head = "key/value head" if kind != "q" and p.kv_heads < p.heads else "head"
    tok = ctx.qtok(i) if kind == "q" else ctx.ktok(i)
    names = {"q": "Query", "k": "Key", "v": "Value"}
    symbolic = f"Σ_m x_{i}m W_{up}^{h}[m,{c}]" + (f" + b_{c}" if bias else "")
    steps = [f"x_{i} is row {i} of '{rows}' ({len(x)} numbers); W_{up}^{h} is head {h}'s "
             f"{W.shape[1]}×{W.shape[2]} projection (right-multiplication: {up} = X W_{up})."]  # fmt: skip
    if kind in ("q", "k") and getattr(p, f"{kind}_norm") is not None:
        steps.append(f"This model then normalises each {kind} head vector ({kind}_norm) before scoring.")
    return Derivation(ctx.stage, ctx.cell, f"{names[kind]} · {head} {h} · token {tok} · feature {c}",
                      sum_formula(f"{kind}_{i},{c}", symbolic, all_terms, bias), ctx.value, sum_of=all_terms,
                      steps=steps, details={"bias": bias.value if bias else None}, bars=all_terms,
                      bars_caption="products x_im·W[m,c]" + (" and the bias" if bias else ""))  # fmt: skip


def _qk(ctx: Context, h: int, i: int, j: int) -> tuple[np.ndarray, np.ndarray, str, str]:
    qs = "q_rotated" if "q_rotated" in ctx.trace else "q"
    ks = "k_rotated" if "k_rotated" in ctx.trace else "k"
    return ctx.a(qs)[h, i], ctx.a(ks)[ctx.group(h), j], qs, ks


def _score_terms(ctx: Context, h: int, i: int, j: int) -> tuple[list[Term], str, list[str], dict]:
    """The summands of s_ij for the layer's score function, its symbolic form, notes, details."""
    q, k, qs, ks = _qk(ctx, h, i, j)
    p = ctx.params
    prime = "'" if qs == "q_rotated" else ""
    steps = [f"q{prime}_{i} is row {i} of head {h}'s {qs}; k{prime}_{j} is row {j} of {ks}"
             f"{f' (key head {ctx.group(h)})' if ctx.group(h) != h else ''}."] + ctx.head_note(h)  # fmt: skip
    if p.score == "general":
        u = q @ p.extra["W_g"][h].astype(F64)  # (d_k,)
        terms = products([f"(q_{i}W)_{b}·k_{j},{b}" for b in range(len(k))], u, k)
        steps.append(f"General (bilinear) score: q_{i} is first mixed by W ({len(k)}×{len(k)}), then meets k_{j}.")
        return terms, f"q_{i} W k_{j}ᵀ = Σ_b (q_{i}W)_b k_{j}b", steps, {"qW": u}
    if p.score == "additive":
        pre = q @ p.extra["W_1"][h].astype(F64) + k @ p.extra["W_2"][h].astype(F64)  # (d_a,)
        t, w = np.tanh(pre), p.extra["w"][h].astype(F64)
        terms = products([f"w_{a}·tanh(…)_{a}" for a in range(len(w))], w, t)
        steps.append(f"Additive (Bahdanau) score: a small network on q_{i} W_1 + k_{j} W_2, squashed by tanh.")
        return terms, f"wᵀ tanh(q_{i} W_1 + k_{j} W_2) = Σ_a w_a tanh(u_a)", steps, {"u": pre, "tanh_u": t}
    terms = products([f"q{prime}_{i},{c}·k{prime}_{j},{c}" for c in range(len(q))], q, k)
    return terms, f"q{prime}_{i} · k{prime}_{j} = Σ_c q{prime}_{i}c k{prime}_{j}c", steps, {"q": q, "k": k}


def scores(ctx: Context) -> Derivation:
    h, i, j = ctx.cell
    terms, symbolic, steps, details = _score_terms(ctx, h, i, j)
    steps.append(f"s_{i},{j} reads as how related token {i} is to token {j}.")
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Score"),
                      sum_formula(f"s_{i},{j}", symbolic, terms, None), ctx.value, sum_of=terms, steps=steps,
                      details=details, bars=terms, bars_caption="summands")  # fmt: skip


def scaled(ctx: Context) -> Derivation:
    h, i, j = ctx.cell
    p = ctx.params
    s = cell_value(ctx.trace, "scores", ctx.cell)
    scale = p.scale if p.scale is not None else 1.0
    d_k = ctx.trace["q"].shape[-1]
    steps = ["Scaling keeps the scores moderate so that softmax does not turn every row one-hot."]
    if p.source != "model" or p.scale_formula == "S / √d_k":
        formula = (f"s_{i},{j} / √d_k = {num(s, 6)} / √{d_k} = {num(s, 6)} / {num(math.sqrt(d_k), 6)} = "
                   f"{num(s * scale, 6)}")  # fmt: skip
    else:
        formula = f"{p.scale_formula.replace('S', f's_{i},{j}')}: {num(s, 6)} × {num(scale, 6)} = {num(s * scale, 6)}"
    terms = None
    if p.softcap:
        cap = float(p.softcap)
        steps.append(f"Soft-capped: {num(cap)}·tanh(x / {num(cap)}) keeps every score within ±{num(cap)}.")
        formula += f"; capped: {num(cap * math.tanh(s * scale / cap), 6)}"
    else:
        raw, _, _, _ = _score_terms(ctx, h, i, j)
        terms = [Term(t.label + "·scale", t.value * scale, t.factors + (scale,)) for t in raw]
        steps.append(f"Equivalently, each of the {len(terms)} summands of s_{i},{j} times {num(scale, 6)}.")
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Scaled score"), formula, ctx.value, sum_of=terms,
                      steps=steps, details={"score": s, "scale": scale, "d_k": d_k},
                      bars=terms, bars_caption="scaled summands")  # fmt: skip


def _previous(ctx: Context, before: str) -> str:
    """The stage the given one reads its scores from: the last present of scores/scaled/masked."""
    order = ["scores", "scaled", "biased", "softcapped", "masked"]
    return [s for s in order[: order.index(before) if before in order else 5] if s in ctx.trace][-1]


def _why_hidden(ctx: Context, i: int, j: int) -> list[str]:
    p = ctx.params
    why = []
    if p.mask == "causal" and j > i:
        why.append(f"causal: key {j} comes after query {i} (j > i), and a token may use only tokens up to itself")
    if p.mask in ("padding", "causal") and j in p.pad_positions:
        why.append(f"padding: key position {j} is a padding key, hidden from every query")
    if p.mask == "custom" and p.custom_mask is not None and bool(np.asarray(p.custom_mask)[i, j]):
        why.append(f"custom mask: the mask file hides key {j} from query {i}")
    if p.sliding_window and i - j >= p.sliding_window:
        why.append(f"sliding window: key {j} is {i - j} ≥ {p.sliding_window} positions behind query {i}")
    if p.band is not None and abs(i - j) > p.band:
        why.append(f"local window: key {j} is {abs(i - j)} > {p.band} positions away from query {i}")
    return why


def masked(ctx: Context) -> Derivation:
    h, i, j = ctx.cell
    src = _previous(ctx, "masked")
    before = cell_value(ctx.trace, src, ctx.cell)
    weight = cell_value(ctx.trace, "weights", ctx.cell) if "weights" in ctx.trace else None
    if math.isinf(ctx.value) and ctx.value < 0:
        why = _why_hidden(ctx, i, j) or ["the mask hides this key from this query"]
        shown = f" (weights[{h},{i},{j}] = {num(weight)})." if weight is not None else "."
        steps = ["Hidden, because " + "; and ".join(why) + ".",
                 f"The score {num(before, 6)} is replaced by −∞ (the notes' −1e999): e^(−∞) = 0, so its weight "
                 f"will be exactly 0" + shown]  # fmt: skip
        return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Masked score"), f"s_{i},{j} = −∞ (hidden)",
                          ctx.value, steps=steps, details={"hidden": True, "why": why, "before": before,
                          "weight": weight})  # fmt: skip
    steps = [f"Not hidden: query {i} may see key {j} under the '{ctx.params.mask}' mask, so the score passes "
             f"through unchanged from '{src}'."]  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Masked score"),
                      f"s_{i},{j} = {num(before, 6)} (visible, unchanged)", ctx.value,
                      sum_of=[Term(f"{src}[{h},{i},{j}]", before)], steps=steps,
                      details={"hidden": False, "why": [], "before": before, "weight": weight})  # fmt: skip


def weights(ctx: Context) -> Derivation:
    h, i, j = ctx.cell
    src = _previous(ctx, "weights")
    T = ctx.params.temperature
    row = ctx.a(src)[h, i] / T  # (n_k,)
    finite = np.isfinite(row)
    m = float(row[finite].max()) if finite.any() else 0.0
    e = np.where(finite, np.exp(np.where(finite, row - m, 0.0)), 0.0)
    total = float(e.sum())
    row_sum = float(ctx.a("weights")[h, i].sum())
    bars = [Term(f"e^(s_{i},{l} − m) · key {ctx.ktok(l)}", float(v)) for l, v in enumerate(e)]  # noqa: E741
    t = " / T" if T != 1.0 else ""
    if total == 0:
        formula = f"a_{i},{j} = 0: every key of row {i} is hidden, so the row's weights are all 0 (not NaN)"
    else:
        formula = (f"a_{i},{j} = e^(s_{i},{j}{t} − m) / Σ_l e^(s_{i},l{t} − m) = {num(e[j], 6)} / {num(total, 6)} = "
                   f"{num(e[j] / total, 6)}")  # fmt: skip
    steps = [f"The row's scores come from '{src}'" + (f", divided by the temperature T = {num(T)}" if T != 1 else "")
             + f"; their maximum m = {num(m, 6)} is subtracted first so that e^x never overflows.",
             f"Σ_l e^(s_{i},l − m) = {num(total, 6)}; row {i} of the weights sums to {1 if total else 0} "
             f"({num(row_sum, 8)} in float32)."]  # fmt: skip
    if not finite[j]:
        steps.insert(0, f"Key {j} is hidden (−∞): e^(−∞) = 0, so its weight is exactly 0.")
    if ctx.params.sinks is not None and total:
        sink = float(e[-1] / total)
        steps.append(f"The last column is the head's learned sink (logit s_{h} = {num(float(row[-1]) * T, 6)}): its "
                     f"e^(s_{h} − m) = {num(float(e[-1]), 6)} is part of the denominator, so it takes "
                     f"{num(sink, 6)} of the row and the real keys' weights sum to 1 − {num(sink, 6)} = "
                     f"{num(1 - sink, 6)}. It has no value: that share adds nothing to the head's output.")  # fmt: skip
    details = {"scores": row * T, "temperature": T, "max": m, "exponentials": e, "exp_sum": total,
               "row_sum": row_sum}  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, ctx.pair_title("Weight"), formula, ctx.value, steps=steps,
                      details=details, bars=bars, bars_caption="the row's exponentials e^(s − m)",
                      focus_bar=j, bar_ticks=list(ctx.trace.key_tokens))  # fmt: skip


def head_output(ctx: Context) -> Derivation:
    h, i, c = ctx.cell
    g = ctx.group(h)
    v = ctx.a("v")[g, :, c]  # (n_k,)
    a = ctx.a("weights")[h, i, : len(v)]  # (n_k,): a learned sink's column (no value) left out
    terms = products([f"a_{i},{j}·v_{j},{c} ({ctx.trace.key_tokens[j]})" for j in range(len(a))], a, v)
    sums = ("which, without the sink's share, sums to less than 1" if ctx.params.sinks is not None
            else "which sums to 1")
    steps = [f"Token {i}'s output is the weighted sum of the value rows: column {c} of v, weighted by row {i} of "
             f"the weights ({sums})."] + ctx.head_note(h)  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, f"Head output · head {h} · query {ctx.qtok(i)} · feature {c}",
                      sum_formula(f"o_{i},{c}", f"Σ_j a_{i}j v_j{c}", terms, None), ctx.value, sum_of=terms,
                      steps=steps, bars=terms, bars_caption="weighted values a_ij·v_jc",
                      bar_ticks=list(ctx.trace.key_tokens))  # fmt: skip


def concat(ctx: Context) -> Derivation:
    i, col = ctx.cell
    d_v = ctx.trace["head_output"].shape[-1]
    h, c = divmod(col, d_v)
    src = cell_value(ctx.trace, "head_output", (h, i, c))
    steps = [f"Concatenation places the heads side by side: columns {h * d_v}..{(h + 1) * d_v - 1} are head {h}'s "
             f"output, so column {col} is head {h}'s feature {c} — a copy, no arithmetic."]  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, f"Concatenation · token {ctx.qtok(i)} · column {col}",
                      f"C[{i},{col}] = O_{h}[{i},{c}] = {num(src, 6)}", ctx.value,
                      sum_of=[Term(f"O_{h}[{i},{c}] (copy)", src)], steps=steps,
                      details={"head": h, "column": c,
                               "copy_of": {"stage": "head_output", "cell": [h, i, c]}})  # fmt: skip


def output(ctx: Context) -> Derivation:
    i, c = ctx.cell
    p = ctx.params
    x = ctx.row("concat", i)  # (h·d_v,)
    w = p.W_o.astype(F64)[:, c]
    terms = products([f"C_{i},{m}·W_C[{m},{c}]" for m in range(len(x))], x, w)
    bias = Term(f"b_C[{c}] (bias)", float(p.b_o[c])) if p.b_o is not None else None
    all_terms = terms + ([bias] if bias else [])
    symbolic = f"Σ_m C_{i}m W_C[m,{c}]" + (f" + b_{c}" if bias else "")
    steps = [f"The output matrix W_C (= W_O, {len(x)}×{p.W_o.shape[1]}) mixes the "
             "concatenated heads back into one vector per token."]  # fmt: skip
    return Derivation(ctx.stage, ctx.cell, f"Output · token {ctx.qtok(i)} · feature {c}",
                      sum_formula(f"y_{i},{c}", symbolic, all_terms, bias), ctx.value, sum_of=all_terms,
                      steps=steps, details={"bias": bias.value if bias else None}, bars=all_terms,
                      bars_caption="products C_im·W_C[m,c]" + (" and the bias" if bias else ""))  # fmt: skip
