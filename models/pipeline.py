"""Request -> trace: every stage of multi-head attention, recorded as numpy, under no_grad."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from . import attention as att
from .checks import check_finite_stages
from .config import AttentionRequest, Cancelled, InputError
from .device import pick_device
from .memory import check_memory, estimate_toy_peak
from .tokenize import build_vocab, check_embeddings, embed, tokens_or_error
from .trace import AttentionTrace, Stage
from .weights import complete_weights, random_weights

StopCheck = Callable[[], bool] | None
# A trace keeps every stage, so its size is known before computing. Above this it is refused with
# a message rather than letting the operating system kill the process for lack of memory.
MAX_TRACE_BYTES = 8 << 30


def trace_bytes(cfg, n_q: int, n_k: int, cross: bool) -> int:
    """Bytes the float32 stages of a trace will hold (an upper bound: every optional stage)."""
    h, d, dk, dv = cfg.heads, cfg.d_model, cfg.head_dim_k, cfg.head_dim_v
    inputs = 3 * n_k * d + (n_q * d if cross else 0)  # embeddings, positional encoding, input, query input
    projections = h * (n_q * dk + n_k * dk + n_k * dv)  # q, k, v
    pairs = 4 * h * n_q * n_k  # scores, scaled, masked, weights
    outputs = h * n_q * dv + n_q * h * dv + n_q * cfg.out_dim  # head outputs, concat, output
    return 4 * (inputs + projections + pairs + outputs)


def _features(n: int) -> tuple[str, ...]:
    return tuple(str(i) for i in range(n))


def _dims(*shape: int) -> str:
    return "×".join(str(s) for s in shape)


class _Recorder:
    """Collects stages as numpy and checks for cancellation at each stage boundary."""

    def __init__(self, should_stop: StopCheck):
        self.stages: list[Stage] = []
        self.should_stop = should_stop

    def add(self, name: str, tensor: torch.Tensor, rows, cols, **kw) -> None:
        if self.should_stop is not None and self.should_stop():
            raise Cancelled(name)
        array = tensor.detach().to("cpu", torch.float32).numpy()
        self.stages.append(
            Stage(name=name, array=array, row_labels=tuple(rows), col_labels=tuple(cols), **kw)
        )


def _sequence(req: AttentionRequest, cross: bool):
    """Tokens and (unembedded) source of one sequence: the keys' (cross=False) or the queries'."""
    cfg = req.config
    matrix = req.cross_embeddings if cross else req.embeddings
    labels = req.cross_labels if cross else req.labels
    what = "query embeddings" if cross else "embeddings"
    if matrix is not None:
        m = check_embeddings(matrix, cfg.d_model, cfg.max_tokens, what)
        if labels is not None and len(labels) != m.shape[0]:
            raise InputError(f"{len(labels)} labels given for {m.shape[0]} rows of {what}")
        tokens = list(labels) if labels is not None else [f"#{i}" for i in range(m.shape[0])]
        return tokens, torch.from_numpy(m)
    sentence = req.cross_sentence if cross else req.sentence
    return tokens_or_error(sentence, cfg.max_tokens, "second sentence" if cross else "sentence"), None


def run(req: AttentionRequest, should_stop: StopCheck = None) -> AttentionTrace:
    """Compute every stage for ``req``. Raises :class:`InputError` for bad input and
    :class:`Cancelled` when ``should_stop()`` turns true between stages."""
    t0 = time.perf_counter()
    cfg = req.config.validate()
    device, device_label, notice = pick_device(cfg.device)
    h, dk, dv = cfg.heads, cfg.head_dim_k, cfg.head_dim_v

    key_tokens, key_matrix = _sequence(req, cross=False)
    if req.is_cross:
        query_tokens, query_matrix = _sequence(req, cross=True)
    else:
        query_tokens, query_matrix = key_tokens, key_matrix
    n_q, n_k = len(query_tokens), len(key_tokens)
    needed = trace_bytes(cfg, n_q, n_k, req.is_cross)
    if needed > MAX_TRACE_BYTES:
        raise InputError(
            f"{n_q}×{n_k} tokens with {h} heads need {needed / 2**30:.1f} GiB for all stages, more than "
            f"the {MAX_TRACE_BYTES / 2**30:.0f} GiB limit; use fewer tokens or heads"
        )
    check_memory(estimate_toy_peak(cfg, n_q, n_k, req.is_cross), f"{n_q}×{n_k} tokens with {h} heads")

    # Embeddings: one seeded table over the distinct tokens of every sentence, sorted.
    sequences = [(key_tokens, key_matrix)] + ([(query_tokens, query_matrix)] if req.is_cross else [])
    sentences = [tokens for tokens, matrix in sequences if matrix is None]
    if sentences:
        vocab = build_vocab(*sentences)
        looked_up = embed([[vocab[t] for t in toks] for toks in sentences], len(vocab), cfg.d_model, cfg.seed)
        looked_up.reverse()
    x_k = key_matrix if key_matrix is not None else looked_up.pop()
    if req.is_cross:
        x_q = query_matrix if query_matrix is not None else looked_up.pop()
    else:
        x_q = x_k

    w = req.weights
    w = complete_weights(cfg, w) if w is not None else random_weights(cfg)
    if w.W_q.shape[1] != cfg.d_model:
        raise InputError(f"weights expect d_model={w.W_q.shape[1]} but the input has {cfg.d_model}")

    def t(a: np.ndarray | None) -> torch.Tensor | None:
        return None if a is None else torch.as_tensor(a, dtype=torch.float32, device=device)

    rec = _Recorder(should_stop)
    fk = _features(cfg.d_model)
    with torch.no_grad():
        x_k, x_q = x_k.to(device, torch.float32), x_q.to(device, torch.float32)
        source = "the embeddings file" if key_matrix is not None else "a seeded nn.Embedding table"
        rec.add("embeddings", x_k, key_tokens, fk, title="Embeddings", formula="X = Embedding(ids)",
                description=f"Each token becomes a row of {cfg.d_model} numbers, read from {source}.",
                shapes=f"→ {_dims(n_k, cfg.d_model)}")  # fmt: skip
        if cfg.pe == "sinusoidal":
            p_k = att.sinusoidal_encoding(n_k, cfg.d_model).to(device, torch.float32)  # (n_k, d)
            rec.add("positional_encoding", p_k, key_tokens, fk, title="Positional encoding",
                    formula="P[i,2j] = sin(i/10000^(2j/d)),  P[i,2j+1] = cos(i/10000^(2j/d))",
                    description="A fixed wave pattern per position, so attention can tell word order.",
                    shapes=f"→ {_dims(n_k, cfg.d_model)}")  # fmt: skip
            x_k = x_k + p_k
            if req.is_cross:
                x_q = x_q + att.sinusoidal_encoding(n_q, cfg.d_model).to(device, torch.float32)
            else:
                x_q = x_k
        rec.add("input", x_k, key_tokens, fk, title="Input",
                formula="X + P" if cfg.pe == "sinusoidal" else "X",
                description="What attention reads: one row per token"
                + (" (embedding plus position)." if cfg.pe == "sinusoidal" else "."),
                shapes=f"→ {_dims(n_k, cfg.d_model)}")  # fmt: skip
        if req.is_cross:
            rec.add("query_input", x_q, query_tokens, fk, title="Query input",
                    formula="X_q + P_q" if cfg.pe == "sinusoidal" else "X_q",
                    description="The second sequence: its rows ask the questions (queries).",
                    shapes=f"→ {_dims(n_q, cfg.d_model)}")  # fmt: skip

        bias = " + b" if w.b_q is not None else ""
        q = att.project(x_q, t(w.W_q), t(w.b_q))  # (h, n_q, d_k)
        rec.add("q", q, query_tokens, _features(dk), per_head=True, title="Queries Q",
                formula=f"Q_i = X W_Q^i{bias}", row_axis="query",
                description="What each token is looking for, one matrix per head.",
                shapes=f"({_dims(n_q, cfg.d_model)})·({_dims(cfg.d_model, dk)}) → {_dims(n_q, dk)}")  # fmt: skip
        k = att.project(x_k, t(w.W_k), t(w.b_k))  # (h, n_k, d_k)
        rec.add("k", k, key_tokens, _features(dk), per_head=True, title="Keys K",
                formula=f"K_i = X W_K^i{' + b' if w.b_k is not None else ''}", row_axis="key",
                description="What each token offers to be matched against, per head.",
                shapes=f"({_dims(n_k, cfg.d_model)})·({_dims(cfg.d_model, dk)}) → {_dims(n_k, dk)}")  # fmt: skip
        v = att.project(x_k, t(w.W_v), t(w.b_v))  # (h, n_k, d_v)
        rec.add("v", v, key_tokens, _features(dv), per_head=True, title="Values V",
                formula=f"V_i = X W_V^i{' + b' if w.b_v is not None else ''}", row_axis="key",
                description="What each token hands over when it is attended to, per head.",
                shapes=f"({_dims(n_k, cfg.d_model)})·({_dims(cfg.d_model, dv)}) → {_dims(n_k, dv)}")  # fmt: skip

        pair = dict(row_axis="query", col_axis="key", per_head=True)
        if cfg.score in ("dot", "scaled"):
            s = att.dot_scores(q, k)  # (h, n_q, n_k)
            formula, shapes = "S = Q Kᵀ", f"({_dims(n_q, dk)})·({_dims(dk, n_k)}) → {_dims(n_q, n_k)}"
            desc = "How well each query matches each key: the dot product of their rows."
        elif cfg.score == "general":
            s = att.general_scores(q, k, t(w.extra["W_g"]))
            formula = "S = Q W Kᵀ"
            shapes = f"({_dims(n_q, dk)})·({_dims(dk, dk)})·({_dims(dk, n_k)}) → {_dims(n_q, n_k)}"
            desc = "Bilinear match: the query is mixed by a learned matrix before meeting the key."
        else:
            s = att.additive_scores(q, k, t(w.extra["W_1"]), t(w.extra["W_2"]), t(w.extra["w"]))
            formula, shapes = "S_ij = wᵀ tanh(q_i W_1 + k_j W_2)", f"→ {_dims(n_q, n_k)}"
            desc = "Additive (Bahdanau) match: a tiny network scores every query-key pair."
        rec.add("scores", s, query_tokens, key_tokens, title="Scores", formula=formula,
                description=desc, shapes=shapes, **pair)  # fmt: skip
        if cfg.score == "scaled":
            s = att.scale(s, dk)
            rec.add("scaled", s, query_tokens, key_tokens, title="Scaled scores",
                    formula=f"S = Q Kᵀ / √d_k  (√{dk} = {np.sqrt(dk):.3g})",
                    description="Dividing by √d_k keeps scores moderate so softmax does not saturate.",
                    shapes=f"({_dims(n_q, dk)})·({_dims(dk, n_k)}) → {_dims(n_q, n_k)}", **pair)  # fmt: skip

        hidden = _mask(req, n_q, n_k, device)
        if hidden is not None:
            s = att.apply_mask(s, hidden)
            what = {"causal": "keys after the query (j > i)", "padding": "the padding keys",
                    "custom": "the keys the custom mask hides"}[cfg.mask]  # fmt: skip
            rec.add("masked", s, query_tokens, key_tokens, title="Masked scores",
                    formula="S_ij = −∞ where hidden", shapes=f"→ {_dims(n_q, n_k)}",
                    description=f"Scores of {what} become −∞, so their weights will be exactly 0.",
                    **pair)  # fmt: skip

        a = att.softmax(s, cfg.temperature)  # (h, n_q, n_k)
        temp = f" / {cfg.temperature:g}" if cfg.temperature != 1.0 else ""
        rec.add("weights", a, query_tokens, key_tokens, title="Softmax weights",
                formula=f"A = softmax(S{temp}) row-wise", shapes=f"→ {_dims(n_q, n_k)}",
                description="Each row becomes a probability distribution over the keys: it sums to 1.",
                **pair)  # fmt: skip
        o = att.weighted_sum(a, v)  # (h, n_q, d_v)
        rec.add("head_output", o, query_tokens, _features(dv), per_head=True, row_axis="query",
                title="Head outputs", formula="O_i = A_i V_i",
                description="Each token's output is the weighted sum of the value rows.",
                shapes=f"({_dims(n_q, n_k)})·({_dims(n_k, dv)}) → {_dims(n_q, dv)}")  # fmt: skip
        c = att.concat_heads(o)  # (n_q, h·d_v)
        rec.add("concat", c, query_tokens, _features(h * dv), row_axis="query", title="Concatenation",
                formula="C = [O_1 … O_h]", shapes=f"{h}×({_dims(n_q, dv)}) → {_dims(n_q, h * dv)}",
                description="The heads' outputs side by side along the features.")  # fmt: skip
        y = att.output_projection(c, t(w.W_o), t(w.b_o))  # (n_q, d_out)
        do = cfg.out_dim
        rec.add("output", y, query_tokens, _features(cfg.out_dim), row_axis="query", title="Output",
                formula=f"Y = C W_O{' + b_O' if w.b_o is not None else ''}",
                description="The output projection mixes the heads back into one vector per token.",
                shapes=f"({_dims(n_q, h * dv)})·({_dims(h * dv, do)}) → {_dims(n_q, do)}")  # fmt: skip

    check_finite_stages(rec.stages)  # float32 overflow (huge inputs or weights): refuse, never NaN
    meta = {"notices": [notice] if notice else []}
    return AttentionTrace(
        stages=tuple(rec.stages), query_tokens=tuple(query_tokens), key_tokens=tuple(key_tokens),
        config=cfg.to_dict() | {"cross": req.is_cross, "weights": "file" if req.weights else "random"},
        device=device_label, elapsed_ms=(time.perf_counter() - t0) * 1000.0, meta=meta,
    )  # fmt: skip


def _mask(req: AttentionRequest, n_q: int, n_k: int, device: torch.device) -> torch.Tensor | None:
    cfg = req.config
    if cfg.mask == "causal":
        return att.causal_mask(n_q, n_k, device)
    if cfg.mask == "padding":
        bad = [p for p in cfg.pad_positions if p >= n_k]
        if bad:
            raise InputError(f"pad position(s) {bad} out of range: there are {n_k} keys (0..{n_k - 1})")
        return att.padding_mask(n_q, n_k, cfg.pad_positions, device)
    if cfg.mask == "custom":
        if req.custom_mask is None:
            raise InputError("mask 'custom' needs a boolean n_q × n_k matrix")
        m = np.asarray(req.custom_mask)
        if m.shape != (n_q, n_k):
            raise InputError(f"custom mask has shape {m.shape}, expected ({n_q}, {n_k})")
        return torch.as_tensor(m.astype(bool), device=device)
    return None
