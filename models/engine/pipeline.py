"""Request -> trace: every stage of multi-head attention, as numpy, under no_grad; n×n stages lazily."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

from models.checks import check_finite_stages
from models.config import AttentionRequest, Cancelled, InputError
from models.engine import attention as att
from models.engine import pairs, stages
from models.engine.attend import Variant
from models.engine.device import pick_device
from models.engine.host import to_numpy
from models.engine.projections import HeadProjections
from models.engine.stages import WORD_VECTORS
from models.engine.tokenize import check_embeddings, embed_words, tokens_or_error
from models.engine.trace import AttentionTrace, Stage
from models.engine.weights import complete_weights, seeded_weights
from models.memory import check_memory, estimate_toy_peak, trace_bytes

StopCheck = Callable[[], bool] | None
# ``override(stage name, tensor) -> tensor``: what-if edits (models/engine/edits.py) replace an eager
# stage's value before it is recorded and before anything after it is computed from it.
Override = Callable[[str, torch.Tensor], torch.Tensor] | None
# What a trace holds eagerly (inputs, Q, K, V, head outputs, the output) plus the pair stores'
# budget. Above this it is refused with a message rather than letting the allocator fail.
MAX_TRACE_BYTES = 8 << 30


class _Recorder:
    """Collects stages (texts from the catalogue) and checks for cancellation at each boundary."""

    def __init__(self, ctx: stages.Context, should_stop: StopCheck):
        self.stages: list[Stage] = []
        self.ctx = ctx
        self.should_stop = should_stop

    def _check(self, name: str) -> None:
        if self.should_stop is not None and self.should_stop():
            raise Cancelled(name)

    def _text(self, name: str) -> dict:
        t = stages.describe(name, self.ctx)
        return dict(title=t.title, formula=t.formula, description=t.description, shapes=t.shapes,
                    row_axis=t.row_axis, col_axis=t.col_axis, per_head=t.per_head)  # fmt: skip

    def add(self, name: str, tensor: torch.Tensor, rows, cols) -> None:
        self._check(name)
        array = to_numpy(tensor, torch.float32)
        self.stages.append(Stage(name, array=array, row_labels=rows, col_labels=cols, **self._text(name)))

    def add_lazy(self, name: str, rows, cols, **source) -> None:
        self._check(name)
        self.stages.append(Stage(name, row_labels=rows, col_labels=cols, **self._text(name), **source))


def sequence_of(req: AttentionRequest, cross: bool):
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
    if labels:  # never silently ignored (issue 36): the sentence's tokens are its labels
        option = "--cross-labels" if cross else "--labels"
        raise InputError(f"{option} names the rows of {'--cross-embeddings' if cross else '--embeddings'}; with "
                         f"{'--cross-sentence' if cross else '--sentence'} the tokens are the labels: leave it out")
    sentence = req.cross_sentence if cross else req.sentence
    return tokens_or_error(sentence, cfg.max_tokens, "second sentence" if cross else "sentence"), None


def run(req: AttentionRequest, should_stop: StopCheck = None, override: Override = None,
        score_edits: dict[tuple[int, int, int], float] | None = None) -> AttentionTrace:  # fmt: skip
    """Compute the stages for ``req``: inputs and Q, K, V now; the n×n stages and what follows
    them when they are read (see :mod:`models.engine.pairs`). Raises :class:`InputError` for bad input
    and :class:`Cancelled` when ``should_stop()`` turns true between stages.

    ``override`` and ``score_edits`` are what-if edits (see :mod:`models.engine.edits`): every stage
    after an edited one is computed from the edited value."""

    def edited(name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor if override is None else override(name, tensor)

    t0 = time.perf_counter()
    cfg = req.config.validate()
    device, device_label, notice = pick_device(cfg.device)
    h, dk, dv = cfg.heads, cfg.head_dim_k, cfg.head_dim_v

    key_tokens, key_matrix = sequence_of(req, cross=False)
    if req.is_cross:
        query_tokens, query_matrix = sequence_of(req, cross=True)
    else:
        query_tokens, query_matrix = key_tokens, key_matrix
    n_q, n_k = len(query_tokens), len(key_tokens)
    needed = trace_bytes(cfg, n_q, n_k, req.is_cross)
    if needed > MAX_TRACE_BYTES:
        raise InputError(
            f"{n_q}×{n_k} tokens with {h} heads need {needed / 2**30:.1f} GiB, more than "
            f"the {MAX_TRACE_BYTES / 2**30:.0f} GiB limit; use fewer tokens or heads"
        )
    check_memory(estimate_toy_peak(cfg, n_q, n_k, req.is_cross), f"{n_q}×{n_k} tokens with {h} heads",
                 fits=lambda n: estimate_toy_peak(cfg, n if not req.is_cross else n_q, n, req.is_cross),
                 hint="use fewer tokens or heads")
    variant(req, n_q, n_k)  # a refused mask before anything is computed

    # Embeddings: each word's own seeded vector (the word and the seed alone: models.engine.tokenize.word_vector).
    sequences = [(key_tokens, key_matrix)] + ([(query_tokens, query_matrix)] if req.is_cross else [])
    sentences = [tokens for tokens, matrix in sequences if matrix is None]
    if sentences:
        looked_up = embed_words(sentences, cfg.d_model, cfg.seed)
        looked_up.reverse()
    x_k = key_matrix if key_matrix is not None else looked_up.pop()
    if req.is_cross:
        x_q = query_matrix if query_matrix is not None else looked_up.pop()
    else:
        x_q = x_k

    w = req.weights
    w = complete_weights(cfg, w) if w is not None else seeded_weights(cfg)
    if w.W_q.shape[1] != cfg.d_model:
        raise InputError(f"weights expect d_model={w.W_q.shape[1]} but the input has {cfg.d_model}")

    def t(a: np.ndarray | None) -> torch.Tensor | None:
        return None if a is None else torch.as_tensor(a, dtype=torch.float32, device=device)

    biases = frozenset(n for n, b in (("q", w.b_q), ("k", w.b_k), ("v", w.b_v), ("o", w.b_o)) if b is not None)
    ctx = stages.Context(
        n_q=n_q, n_k=n_k, d_model=cfg.d_model, d_k=dk, d_v=dv, heads=h, d_out=cfg.out_dim, biases=biases,
        score=cfg.score, temperature=cfg.temperature, mask=cfg.mask, pad_positions=tuple(cfg.pad_positions),
        pe=cfg.pe, embedding_source="the embeddings file" if key_matrix is not None else WORD_VECTORS,
    )  # fmt: skip
    rec = _Recorder(ctx, should_stop)
    fk = stages.features(cfg.d_model)
    with torch.no_grad():
        x_k, x_q = x_k.to(device, torch.float32), x_q.to(device, torch.float32)
        x_k = edited("embeddings", x_k)
        if not req.is_cross:
            x_q = x_k
        rec.add("embeddings", x_k, key_tokens, fk)
        if cfg.pe == "sinusoidal":
            p_k = att.sinusoidal_encoding(n_k, cfg.d_model).to(device, torch.float32)  # (n_k, d)
            rec.add("positional_encoding", p_k, key_tokens, fk)
            x_k = x_k + p_k
            if req.is_cross:
                x_q = x_q + att.sinusoidal_encoding(n_q, cfg.d_model).to(device, torch.float32)
            else:
                x_q = x_k
        x_k = edited("input", x_k)
        x_q = edited("query_input", x_q) if req.is_cross else x_k
        rec.add("input", x_k, key_tokens, fk)
        if req.is_cross:
            rec.add("query_input", x_q, query_tokens, fk)
        ends = [torch.aminmax(x) for x in ((x_k,) if x_q is x_k else (x_k, x_q))]  # no |x| copy: 0.08 s, not 1
        largest = max(max(-float(lo), float(hi)) for lo, hi in ends)
        projections = None
        if override is None and n_q * n_k > pairs.LONG_CELLS:  # a long input: head by head when first read,
            projections = HeadProjections(x_q, x_k, {"q": (t(w.W_q), t(w.b_q)), "k": (t(w.W_k), t(w.b_k)),
                                                     "v": (t(w.W_v), t(w.b_v))}, largest)  # fmt: skip
            q, k, v = (projections.tensors[name] for name in ("q", "k", "v"))  # the first rows need head 0's
            for name, rows, d in (("q", query_tokens, dk), ("k", key_tokens, dk), ("v", key_tokens, dv)):
                rec.add_lazy(name, rows, stages.features(d), shape=tuple(projections.tensors[name].shape),
                             compute=lambda name=name: to_numpy(projections.whole(name)))  # fmt: skip
        else:
            q = edited("q", att.project(x_q, t(w.W_q), t(w.b_q)))  # (h, n_q, d_k)
            rec.add("q", q, query_tokens, stages.features(dk))
            k = edited("k", att.project(x_k, t(w.W_k), t(w.b_k)))  # (h, n_k, d_k)
            rec.add("k", k, key_tokens, stages.features(dk))
            v = edited("v", att.project(x_k, t(w.W_v), t(w.b_v)))  # (h, n_k, d_v)
            rec.add("v", v, key_tokens, stages.features(dv))

        params = {name: t(w.extra[name]) for name in ("W_g", "W_1", "W_2", "w") if name in w.extra}
        spec = pairs.PairSpec(q=q, k=k, v=v, head_groups=tuple(range(h)), variant=variant(req, n_q, n_k, params),
                              score_edits=score_edits or None,
                              largest_input=largest, w_o=t(w.W_o),
                              ready=None if projections is None else projections.ready)  # fmt: skip
        store = pairs.PairStore(spec)
        for name in spec.names:
            rec.add_lazy(name, query_tokens, key_tokens, store=store)

        def value_norms() -> np.ndarray:
            return to_numpy(store.value_norms(), torch.float32)  # (h, n_k)

        rec.add_lazy("value_norms", stages.head_labels(h), key_tokens, compute=value_norms, shape=(h, n_k))

        def head_output() -> np.ndarray:
            return to_numpy(store.head_output(), torch.float32)  # (h, n_q, d_v)

        def concat() -> np.ndarray:
            return to_numpy(att.concat_heads(store.head_output()), torch.float32)  # (n_q, h·d_v)

        def output() -> np.ndarray:
            with torch.no_grad():
                c = att.concat_heads(store.head_output())
                return to_numpy(att.output_projection(c, t(w.W_o), t(w.b_o)), torch.float32)

        def rows_of(name: str):
            """A long input's rows of ``name``, from those rows' weights alone (``explain`` of one cell)."""
            if store.long is None:
                return None

            def piece(head: int, r0: int, r1: int) -> np.ndarray:
                with torch.no_grad():
                    if name == "head_output":
                        return to_numpy(store.head_output_rows(r0, r1, head)[0], torch.float32)
                    c = att.concat_heads(store.head_output_rows(r0, r1))
                    y = c if name == "concat" else att.output_projection(c, t(w.W_o), t(w.b_o))
                    return to_numpy(y, torch.float32)

            def rows(head: int, r0: int, r1: int) -> np.ndarray:
                # A few rows' weights at a time (a block's worth): the window's band of 16,384 rows of
                # 'concat' asked (16,384 × 16,384) weights at once, 1 GiB a head (issue 50, point 1).
                step = store.block_rows
                return np.concatenate([piece(head, a, min(r1, a + step)) for a in range(r0, r1, step)]) \
                    if r1 - r0 > step else piece(head, r0, r1)  # fmt: skip

            return rows

        rec.add_lazy("head_output", query_tokens, stages.features(dv), compute=head_output, shape=(h, n_q, dv),
                     compute_rows=rows_of("head_output"))  # fmt: skip
        rec.add_lazy("concat", query_tokens, stages.features(h * dv), compute=concat, shape=(n_q, h * dv),
                     compute_rows=rows_of("concat"))  # fmt: skip
        rec.add_lazy("output", query_tokens, stages.features(cfg.out_dim), compute=output, shape=(n_q, cfg.out_dim),
                     compute_rows=rows_of("output"))  # fmt: skip

    check_finite_stages(rec.stages)  # float32 overflow (huge inputs or weights): refuse, never NaN
    meta = {"notices": [notice] if notice else []}
    return AttentionTrace(
        stages=tuple(rec.stages), query_tokens=tuple(query_tokens), key_tokens=tuple(key_tokens),
        config=cfg.to_dict() | {"cross": req.is_cross, "weights": "file" if req.weights else "random"},
        device=device_label, elapsed_ms=(time.perf_counter() - t0) * 1000.0, meta=meta,
    )  # fmt: skip


def materialize(trace: AttentionTrace, should_stop: StopCheck = None) -> AttentionTrace:
    """Compute every stage now (for small inputs and tests): reading is then free."""
    for stage in trace.stages:
        if should_stop is not None and should_stop():
            raise Cancelled(stage.name)
        _ = stage.array
    return trace


def variant(req: AttentionRequest, n_q: int, n_k: int, params: dict | None = None) -> Variant:
    """The toy's attention as data (its one place): the score kind (``params``: a general or additive
    score's weights), 1/√d_k for a scaled score, the temperature and the mask (a refused mask named)."""
    cfg = req.config
    facts = dict(score={"scaled": "dot"}.get(cfg.score, cfg.score), score_params=params or None,
                 scale=math.sqrt(cfg.head_dim_k) if cfg.score == "scaled" else None, divide=cfg.score == "scaled",
                 temperature=cfg.temperature)  # fmt: skip
    if cfg.mask == "causal":
        return Variant(causal=True, **facts)
    if cfg.mask == "padding":
        bad = [p for p in cfg.pad_positions if p >= n_k]
        if bad:
            raise InputError(f"pad position(s) {bad} out of range: there are {n_k} keys (0..{n_k - 1})")
        return Variant(pads=tuple(sorted(set(cfg.pad_positions))), **facts)
    if cfg.mask == "custom":
        if req.custom_mask is None:
            raise InputError("mask 'custom' needs a boolean n_q × n_k matrix")
        m = np.asarray(req.custom_mask)
        if m.shape != (n_q, n_k):
            raise InputError(f"custom mask has shape {m.shape}, expected ({n_q}, {n_k})")
        return Variant(custom=m.astype(bool), **facts)
    return Variant(**facts)
