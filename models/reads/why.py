"""Why does this head attend here? One score split into query-source × key-source terms, exactly.

A head's score ``s_ij`` (the ``scaled`` stage: after scaling, before soft-capping, masks and sinks;
``scores`` when the toy has no scaling; ``biased`` for T5, whose position bias is one more term:
:mod:`models.reads.why_encdec`) is ``q_i · k_j · scale``. Once every norm's scale is frozen
at the real run's value, q_i and k_j are *linear* in the residual stream, and the residual stream
is a sum of named sources (the embedding, learned positions, every earlier head's write, biases,
MLPs: :mod:`models.reads.why_stream`). Writing ``q_i = Σ_a q_i^a`` and ``k_j = Σ_b k_j^b`` gives

    s_ij = Σ_a Σ_b T[a, b],    T[a, b] = scale · q_i^a · k_j^b      (general score: q_i^a W_g k_j^bᵀ)

and the table is checked against the recorded stage at run time (:data:`TOLERANCE`, relative to
the sum of the terms' magnitudes); where it does not add up, the split is refused in one line.

For the toy (models/engine/pipeline.py) the sources are the study notes' x = e + p: ``embed``, ``pos`` (with
the sinusoidal encoding) and ``bias`` (the q/k biases), so T holds the token·token, token·position,
position·token and position·position terms.

:func:`why` answers one cell; :func:`why_row` answers "why this key and not the others" for one query
row: the entries of T for the top key minus the softmax-weighted mean of T over the keys.
"""

from __future__ import annotations

import json

import numpy as np

from models.config import InputError
from models.engine.host import to_numpy
from models.reads.why_sides import Sides, TooManySources

TOLERANCE = 1e-5  # |Σ T − s| ≤ TOLERANCE · size: the split must add up to the score (check_sum)


def check_sum(table: np.ndarray, score: float, what: str, size: float = 0.0) -> float:
    """The relative error of the split, ``|Σ T − s| / max(|s|, Σ |T|, size)``; InputError (one line)
    when beyond :data:`TOLERANCE`. ``size``: :meth:`Sides.size`, the magnitude of the products float32
    added to make the score: its rounding error is a multiple of float32's ε (6e-8) of that, so a
    small score made of large cancelling products (0.0017 from terms of ~1) is exact to ~1e-5 of
    the score's own size, not of the score (which the sum of |T|, already cancelled, can be near)."""
    total = float(table.sum())
    scale = max(abs(score), float(np.abs(table).sum()), size, 1e-30)
    error = abs(total - score) / scale
    if not error <= TOLERANCE:
        raise InputError(f"why: {what}: the source terms sum to {total:.7g}, the score is {score:.7g} "
                         f"(relative error {error:.2g} > {TOLERANCE:g}); refusing an inexact split")  # fmt: skip
    return error


# --- the toy: x = e + p ---------------------------------------------------------------------------


def toy_sides(trace, params, head: int, row: int, cols) -> Sides:
    """The toy's sources: ``embed`` (the embedding rows), ``pos`` (the sinusoidal encoding, when on)
    and ``bias`` (b_q / b_k, when given). Query and key rows are those of the trace's inputs."""
    if params.score not in ("dot", "scaled", "general"):
        raise InputError(f"why: the {params.score} score is not a product of a query and a key; "
                         "choose dot, scaled or general")  # fmt: skip
    from models.engine import attention as att

    cross = bool(trace.config.get("cross"))
    e_k = np.asarray(trace["embeddings"].array, dtype=np.float64)  # (n_k, d)
    n_q = len(trace.query_tokens)
    if cross:
        e_q = np.asarray(params.query_embeddings, dtype=np.float64)
    else:
        e_q = e_k
    parts_q, parts_k = {"embed": e_q[row]}, {"embed": e_k[list(cols)]}
    if "positional_encoding" in trace:
        p_k = np.asarray(trace["positional_encoding"].array, dtype=np.float64)
        p_q = to_numpy(att.sinusoidal_encoding(n_q, e_q.shape[1]).double()) if cross else p_k
        parts_q["pos"], parts_k["pos"] = p_q[row], p_k[list(cols)]
    g = params.head_groups[head]
    wq, wk = params.W_q[head].astype(np.float64), params.W_k[g].astype(np.float64)
    query = [v @ wq for v in parts_q.values()]
    keys = [v @ wk for v in parts_k.values()]  # each (n_keys, d_k)
    q_size = sum(np.abs(v) for v in parts_q.values()) @ np.abs(wq)  # (d_k,): what float32 rounds q relative to
    k_size = sum(np.abs(v) for v in parts_k.values()) @ np.abs(wk)  # (n_keys, d_k)
    qn, kn = list(parts_q), list(parts_k)
    if params.b_q is not None:
        query.append(params.b_q[head].astype(np.float64))
        qn.append("bias")
        q_size = q_size + np.abs(query[-1])
    if params.b_k is not None:
        keys.append(np.broadcast_to(params.b_k[g].astype(np.float64), keys[0].shape))
        kn.append("bias")
        k_size = k_size + np.abs(keys[-1])
    bilinear = params.extra["W_g"][head].astype(np.float64) if params.score == "general" else None
    scale = params.scale if params.score == "scaled" and params.scale is not None else 1.0
    return Sides(tuple(qn), tuple(kn), np.stack(query), np.stack(keys, axis=1), tuple(cols), float(scale), bilinear,
                 query_size=q_size, key_size=k_size)  # fmt: skip


# --- the answer ------------------------------------------------------------------------------------


def score_stage(trace) -> str:
    """The stage the split adds up to: ``biased`` (T5: the position bias is one more term), else
    ``scaled`` when the trace has it, else ``scores``."""
    return next(name for name in ("biased", "scaled", "scores") if name in trace)


def check_cell(trace, head: int, row: int, col: int) -> None:
    heads, n_q, n_k = trace[score_stage(trace)].shape[0], len(trace.query_tokens), len(trace.key_tokens)
    for name, value, size in (("head", head, heads), ("row", row, n_q), ("column", col, n_k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < size:
            raise InputError(f"why: {name} {value!r} is out of range 0..{size - 1}")


def answer(trace, sides: Sides, head: int, row: int, col: int) -> dict:
    """The dict ``--json`` prints: the score, the sources on each side, the table and its totals."""
    one = np.zeros(len(sides.cols))  # this key alone (np.eye(n)[j] made an n × n matrix: 5 GiB at 26,000 keys)
    one[sides.cols.index(col)] = 1.0
    table = sides.table(one)
    stage = score_stage(trace)
    score = float(trace[stage].cell(head, row, col))
    error = check_sum(table, score, f"head {head}, row {row}, column {col}", sides.size(one))
    return {
        "stage": stage, "head": head, "row": row, "col": col, "layer": trace.config.get("layer"),
        "query_token": trace.query_tokens[row], "key_token": trace.key_tokens[col],
        "score": score, "total": float(table.sum()), "relative_error": error,
        "query_sources": sides.query_labels, "key_sources": sides.key_labels,
        "table": table.tolist(), "row_totals": table.sum(1).tolist(), "column_totals": table.sum(0).tolist(),
    }  # fmt: skip


def row_answer(trace, sides: Sides, head: int, row: int) -> dict:
    """For query ``row``: T for the top key minus the softmax-weighted mean of T over the keys."""
    weights = np.asarray(trace["weights"].rows(head, row, row + 1)[0], dtype=np.float64)[: len(trace.key_tokens)]
    w = weights[list(sides.cols)]
    if w.sum() <= 0:
        raise InputError(f"why: query row {row} sees no key")
    w = w / w.sum()
    top = int(sides.cols[int(np.argmax(w))])
    coeffs = -w
    coeffs[sides.cols.index(top)] += 1.0
    table = sides.table(coeffs)
    scores = np.array([float(trace[score_stage(trace)].cell(head, row, j)) for j in sides.cols])
    margin = float(scores[sides.cols.index(top)] - w @ scores)
    check_sum(table, margin, f"head {head}, row {row}: top key {top} against the mean", sides.size(coeffs))
    return {
        "head": head, "row": row, "query_token": trace.query_tokens[row], "top_key": top,
        "top_token": trace.key_tokens[top],
        "margin": margin, "query_sources": sides.query_labels, "key_sources": sides.key_labels,
        "table": table.tolist(), "row_totals": table.sum(1).tolist(), "column_totals": table.sum(0).tolist(),
    }  # fmt: skip


def top_entries(result: dict, count: int = 8) -> list[tuple[str, str, float]]:
    table = np.asarray(result["table"])
    order = np.argsort(-np.abs(table), axis=None)[:count]
    a, b = np.unravel_index(order, table.shape)
    return [(result["query_sources"][i], result["key_sources"][j], float(table[i, j])) for i, j in zip(a, b)]


def for_and_against(row_result: dict, count: int = 8) -> tuple[list, list]:
    """The row split's largest terms, ``(for, against)``: those of the margin's sign (they make the top
    key win) and those of the other sign (they work against it), each largest first."""
    sign = 1.0 if row_result["margin"] >= 0 else -1.0
    table = np.asarray(row_result["table"])
    floor = 1e-9 * float(np.abs(table).max(initial=0.0))  # a term that cancels to rounding is neither
    entries = top_entries(row_result, table.size)
    pro = [e for e in entries if e[2] * sign > floor][:count]
    con = [e for e in entries if e[2] * sign < -floor][:count]
    return pro, con


def words(result: dict, count: int = 5, entries=None) -> list[str]:
    """The top entries in words: "what L0 H3 wrote at 'cat' meets what embed wrote at 'the': +2.41"
    (``entries``: these ``(query source, key source, value)`` instead of the largest ``count``)."""
    qt, kt = result.get("query_token", ""), result.get("key_token", result.get("top_token", ""))
    return [f"the {qs} from {qt!r} to {kt!r}: {v:+.4g}" if qs == ks == "position bias" else
            f"what {qs} wrote at {qt!r} meets what {ks} wrote at {kt!r}: {v:+.4g}"
            for qs, ks, v in (top_entries(result, count) if entries is None else entries)]  # fmt: skip


def text(result: dict, row_result: dict | None = None, count: int = 8) -> str:
    """The answer as lines: the score, the largest entries, the row and column totals."""
    where = f"layer {result['layer']} " if result.get("layer") is not None else ""
    lines = [f"{where}head {result['head']}, query {result['row']} {result['query_token']!r}, "
             f"key {result['col']} {result['key_token']!r}",
             f"{result['stage']} = {result['score']:.6g}  (the {len(result['query_sources'])} × "
             f"{len(result['key_sources'])} terms sum to {result['total']:.6g}, relative error "
             f"{result['relative_error']:.1e})", "", "largest terms (query source × key source):"]  # fmt: skip
    lines += [f"  {qs:>16} × {ks:<16} {v:+.6g}" for qs, ks, v in top_entries(result, count)]
    lines += ["", "query-source totals:"] + _totals(result["query_sources"], result["row_totals"], count)
    lines += ["", "key-source totals:"] + _totals(result["key_sources"], result["column_totals"], count)
    if result.get("row_note"):
        lines += ["", f"the row is not split: {result['row_note']}"]
    if row_result is not None:
        lines += ["", f"why key {row_result['top_key']} {row_result['top_token']!r} and not the others "
                      f"(its score minus the weighted mean: {row_result['margin']:+.6g}):"]  # fmt: skip
        pro, con = for_and_against(row_result, (count + 1) // 2)
        for heading, entries in (("for it (the margin's sign):", pro), ("against it (the other sign):", con)):
            lines += [f"  {heading}"] + [f"  {qs:>16} × {ks:<16} {v:+.6g}" for qs, ks, v in entries]
            lines += [] if entries else ["    none"]
    return "\n".join(lines) + "\n"


def _totals(names, totals, count: int) -> list[str]:
    order = np.argsort(-np.abs(np.asarray(totals)))[:count]
    return [f"  {names[i]:>16} {totals[i]:+.6g}" for i in order]


def to_json(result: dict) -> str:
    return json.dumps(result, ensure_ascii=False)


# --- the front door --------------------------------------------------------------------------------


def sides_for(trace, params, head: int, row: int, cols, model=None, source=None) -> Sides:
    """The sources of ``trace``'s head at ``row`` and key rows ``cols``: the toy's, or (``model``
    given) the pretrained residual stream's (:mod:`models.reads.why_stream`)."""
    if model is None:
        if params is None:
            raise InputError("why: a toy trace needs its LayerParams (models.reads.params.toy_params(request)); "
                             "or pass the RunSpec")  # fmt: skip
        return toy_sides(trace, params, head, row, cols)
    try:
        if trace.config.get("encoder_decoder"):
            from models.reads.why_encdec import encdec_sides

            if isinstance(source, str):  # the source sentence: its token ids, as the trace read them
                source = model.encode(source, trace.config.get("max_tokens"), "encoder").ids
            return encdec_sides(model, trace, head, row, cols, source)
        from models.reads.why_stream import pretrained_sides

        return pretrained_sides(model, trace, head, row, cols)
    except InputError as exc:
        low = trace.meta.get("layers_dtype", "float32")
        if low == "float32" or isinstance(exc, TooManySources):
            raise
        raise InputError(f"{exc} (the layers below ran in {low}: the split adds up exactly only to a trace "
                         f"made with --dtype float32)") from None  # fmt: skip


def why(trace_or_inputs, head: int, row: int, col: int, *, model=None, params=None, with_row: bool = False,
        source=None) -> dict:  # fmt: skip
    """The split of one cell: the dict ``main.py why --json`` prints.

    ``trace_or_inputs``: a :class:`models.runspec.RunSpec` (everything is computed from it), or a trace
    with ``params`` (the toy's LayerParams) or ``model`` (the loaded pretrained model that made it; read
    again from the trace's folder when not given; the split is checked against the trace either way).
    ``with_row``: add ``"row_split"``, the top key against the weighted mean (:func:`why_row`).
    ``source``: an encoder-decoder's source sentence (or its token ids), which its decoder block's
    cross-attention reads (taken from the RunSpec when one is given)."""
    trace, params, model, source = _resolve(trace_or_inputs, params, model, source)
    check_cell(trace, head, row, col)
    cols = tuple(sorted(set(_visible(trace, head, row) if with_row else ()) | {col}))
    try:
        sides = sides_for(trace, params, head, row, cols, model, source)
    except TooManySources as exc:  # every key's sources do not fit: the cell alone does
        if len(cols) == 1:
            raise
        sides, with_row, note = sides_for(trace, params, head, row, (col,), model, source), False, str(exc)
    result = answer(trace, sides, head, row, col)
    if with_row:
        result["row_split"] = row_answer(trace, _only(sides, _visible(trace, head, row)), head, row)
    elif cols != (col,):
        result["row_note"] = note
    return result


def why_row(trace_or_inputs, head: int, row: int, *, model=None, params=None, source=None) -> dict:
    """"Why this key and not the others" for one query row (see :func:`row_answer`)."""
    trace, params, model, source = _resolve(trace_or_inputs, params, model, source)
    check_cell(trace, head, row, 0)
    sides = sides_for(trace, params, head, row, _visible(trace, head, row), model, source)
    return row_answer(trace, sides, head, row)


def _resolve(trace_or_inputs, params, model, source):
    from models.runspec import RunSpec

    if not isinstance(trace_or_inputs, RunSpec):
        trace = trace_or_inputs
        if model is None and trace.config.get("source") == "pretrained":  # the model that made it, from its folder
            model = model_of(trace)
        return trace, params, model, source
    spec = trace_or_inputs
    if spec.uses_model:
        from models.run_engine import load_model, model_trace

        model = load_model(spec)
        return model_trace(spec, model), None, model, spec.sentence if source is None else source
    from models.engine.pipeline import run
    from models.reads.params import toy_params
    from models.run_engine import toy_request

    req = toy_request(spec)
    return run(req), toy_params(req), None, None


def model_of(trace):
    """The model that made a pretrained ``trace``, read again from its folder on the trace's device
    (a trace made on a card is split on a card) with its layers in the trace's ``--dtype``, so the
    layers below the traced one give its input again (the traced layer is float32 either way)."""
    from models.pretrained import load_model

    device = "cuda" if str(trace.config.get("device", "cpu")).startswith("cuda") else "cpu"
    return load_model(trace.config["path"], device=device, dtype=trace.meta.get("layers_dtype", "float32"))


def _visible(trace, head: int, row: int) -> tuple[int, ...]:
    """The key columns query ``row`` sees (weight > 0 or not masked), at least one."""
    n_k = len(trace.key_tokens)
    if "masked" not in trace:
        return tuple(range(n_k))
    masked = np.asarray(trace["masked"].rows(head, row, row + 1)[0])[:n_k]
    cols = tuple(int(j) for j in np.flatnonzero(np.isfinite(masked)))
    if not cols:
        raise InputError(f"why: query row {row} sees no key")
    return cols


def _only(sides: Sides, cols) -> Sides:
    index = [sides.cols.index(j) for j in cols]
    additive = None if sides.additive is None else sides.additive[index]
    key_size = None if sides.key_size is None else sides.key_size[index]
    return Sides(sides.query_names, sides.key_names, sides.query, sides.keys[index], tuple(cols), sides.scale,
                 sides.bilinear, additive, sides.additive_name, sides.query_size, key_size)  # fmt: skip
