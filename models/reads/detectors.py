"""Named head detectors on probes the app generates: previous, duplicate, induction, sink, retrieval.

numpy (plus the model's own forward pass in :func:`detect`); no Qt. Every formula is here, once.

Probes (``PROBE_SEED`` 0 unless told otherwise; ``PROBES_PER_KIND`` of each kind), each framed by
the model's own special tokens (BERT ``[CLS] … [SEP]``, LLaMA ``<s> …``, GPT-2 nothing). Their
tokens are drawn from the model's vocabulary without its special tokens (word-like tokens first),
and the body has ``m = min(48, max_positions − specials)`` tokens:

- ``repeats``   m tokens drawn with replacement from ``max(3, m // 4)`` distinct tokens (many repeats)
- ``induction`` a block of ``m // 2`` distinct tokens, then the same block again
- ``retrieval`` (decoders) 2 filler tokens, a needle of ``k = max(3, m // 8)`` distinct tokens, more
  filler (distinct, none from the needle), then the needle again, copied at the end

Detectors, for one head's weights ``A`` (n × n) on one probe; each score is the mean over the probes
of its kind. ``previous``, ``duplicate`` and ``induction`` are TransformerLens's ``head_detector``
(``error_measure="mul"``, BOS and current token not excluded): ``score = Σ_ij A_ij P_ij / Σ_ij A_ij``
with a 0/1 pattern ``P``, lower-triangular (``tril``):

- ``previous``  P_i,i−1 = 1                                                   (on ``repeats``)
- ``duplicate`` P_ij = 1 where j ≠ i and token_j = token_i                     (on ``repeats``)
- ``induction`` P_ij = 1 where j ≥ 1 and token_(j−1) = token_i, j − 1 ≠ i      (on ``induction``)
- ``sink``      mean over query rows i of A_i,0: the share of attention on the first token
                                                           (on every ``repeats`` and ``induction`` probe)
- ``retrieval`` (Wu et al., 2024, teacher-forced): over the needle's copy, at the query that is about
  to produce needle token t (t = 1 … k − 1: the copy's previous token), the head copies when its
  largest weight is on the needle's token t far back; the score is the share of the k − 1 tokens it
  copies. NaN for encoders (no copying without a causal mask).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from models.errors import InputError

DETECTORS = ("previous", "duplicate", "induction", "sink", "retrieval")
DEFINITIONS = {
    "previous": "TransformerLens previous_token_head: sum(A*P)/sum(A), P[i,i-1]=1, on repeats probes",
    "duplicate": "TransformerLens duplicate_token_head: sum(A*P)/sum(A), P[i,j]=1 if j!=i and tok_j=tok_i, tril",
    "induction": "TransformerLens induction_head: duplicate pattern shifted one key right, tril, on a block twice",
    "sink": "mean over query rows of A[i,0] on the repeats and induction probes",
    "retrieval": "Wu et al. 2024 (teacher-forced): share of needle tokens whose copy query puts its argmax on them",
}
PROBE_SEED = 0
PROBES_PER_KIND = 4
MAX_BODY = 48


@dataclass(frozen=True)
class Probe:
    kind: str  # "repeats", "induction" or "retrieval"
    ids: tuple[int, ...]  # the whole sequence, special tokens included
    # retrieval: (query position, target position) of every needle token the copy reproduces
    copies: tuple[tuple[int, int], ...] = ()


# --- the patterns, as TransformerLens writes them ----------------------------------------------------
def previous_pattern(tokens) -> np.ndarray:
    n = len(tokens)
    return np.tril(np.eye(n, k=-1))


def duplicate_pattern(tokens) -> np.ndarray:
    t = np.asarray(tokens)
    eq = (t[None, :] == t[:, None]).astype(np.float64)
    np.fill_diagonal(eq, 0.0)  # a token is always a duplicate of itself: ignored
    return np.tril(eq)


def induction_pattern(tokens) -> np.ndarray:
    dup = duplicate_pattern(tokens)
    shifted = np.zeros_like(dup)
    shifted[:, 1:] = dup[:, :-1]  # one key to the right; the first column is 0
    return np.tril(shifted)


PATTERNS: dict[str, tuple[str, Callable]] = {
    "previous": ("repeats", previous_pattern),
    "duplicate": ("repeats", duplicate_pattern),
    "induction": ("induction", induction_pattern),
}


def pattern_score(A: np.ndarray, P: np.ndarray) -> np.ndarray:
    """``Σ A∘P / Σ A`` over the last two axes of ``A (..., n, n)`` (float64)."""
    A = np.asarray(A, dtype=np.float64)
    return (A * P).sum((-2, -1)) / A.sum((-2, -1))


def sink_score(A: np.ndarray) -> np.ndarray:
    return np.asarray(A, dtype=np.float64)[..., :, 0].mean(-1)


def retrieval_score(A: np.ndarray, copies) -> np.ndarray:
    """Share of ``copies`` (query, target) whose query row has its largest weight on the target."""
    A = np.asarray(A)
    hits = [A[..., q, :].argmax(-1) == t for q, t in copies]
    return np.mean(hits, axis=0).astype(np.float64)


def detectors_on(kind: str) -> tuple[str, ...]:
    """The detectors a probe of this kind is read by (the keys of :func:`scores_on`)."""
    names = [name for name, (k, _) in PATTERNS.items() if k == kind]
    return (*names, *(("sink",) if kind in ("repeats", "induction") else ()),
            *(("retrieval",) if kind == "retrieval" else ()))  # fmt: skip


def scores_on(kind: str, A: np.ndarray, probe: Probe) -> dict[str, np.ndarray]:
    """Every detector that reads a probe of this kind, on ``A (..., n, n)``."""
    out = {name: pattern_score(A, make(probe.ids)) for name, (k, make) in PATTERNS.items() if k == kind}
    if kind in ("repeats", "induction"):
        out["sink"] = sink_score(A)
    if kind == "retrieval":
        out["retrieval"] = retrieval_score(A, probe.copies)
    return out


# --- probes -----------------------------------------------------------------------------------------
def make_probes(pool, prefix=(), suffix=(), body: int = MAX_BODY, decoder: bool = True,
                seed: int = PROBE_SEED, count: int = PROBES_PER_KIND) -> list[Probe]:  # fmt: skip
    """The probes of every kind (see the module docstring), from token ids ``pool``."""
    pool = np.asarray(sorted(set(int(i) for i in pool)))
    m = int(body)
    if m < 6 or len(pool) < m:
        raise ValueError(f"probes need at least 6 positions and {m} distinct tokens, got {m} and {len(pool)}")
    rng = np.random.default_rng(seed)
    pre, suf = tuple(prefix), tuple(suffix)
    frame = lambda b: pre + tuple(int(i) for i in b) + suf  # noqa: E731
    probes = []
    for _ in range(count):
        few = rng.choice(pool, size=max(3, m // 4), replace=False)
        probes.append(Probe("repeats", frame(rng.choice(few, size=m, replace=True))))
    for _ in range(count):
        block = rng.choice(pool, size=m // 2, replace=False)
        probes.append(Probe("induction", frame(np.concatenate([block, block]))))
    if decoder:
        k = max(3, m // 8)
        for _ in range(count):
            drawn = rng.choice(pool, size=m - k, replace=False)  # needle and filler: all distinct
            needle, filler = drawn[:k], drawn[k:]
            b = np.concatenate([filler[:2], needle, filler[2:], needle])
            start, copy = len(pre) + 2, len(pre) + m - k
            copies = tuple((copy + t - 1, start + t) for t in range(1, k))
            probes.append(Probe("retrieval", frame(b), copies))
    return probes


def word_pool(tokens: dict[str, int], special: set[int], vocab_size: int, want: int) -> list[int]:
    """Token ids for probes: word-like tokens (letters, 2+ long, BERT ``##`` pieces left out) if
    there are ``want`` of them, else every non-special token."""
    usable = {t: i for t, i in tokens.items() if i not in special and i < vocab_size}
    words = [i for t, i in usable.items() if not t.startswith("##") and len(t.lstrip("Ġ▁")) >= 2
             and t.lstrip("Ġ▁").isalpha()]  # fmt: skip
    return sorted(words) if len(words) >= want else sorted(usable.values())


def model_probes(model, seed: int = PROBE_SEED) -> list[Probe]:
    """Probes for a :class:`~models.pretrained.PretrainedModel`, framed by its own special tokens."""
    tok = model.tokenizer.tokenizer
    bare = tok.encode("probe", add_special_tokens=False).ids
    full = tok.encode("probe", add_special_tokens=True).ids
    at = next(i for i in range(len(full)) if full[i : i + len(bare)] == bare)
    prefix, suffix = full[:at], full[at + len(bare) :]
    body = min(MAX_BODY, model.max_positions - len(prefix) - len(suffix))
    special = {i for t, i in tok.get_vocab(with_added_tokens=True).items() if t in {
        a.content for a in tok.get_added_tokens_decoder().values() if a.special}}  # fmt: skip
    pool = word_pool(tok.get_vocab(with_added_tokens=False), special, model.arch.vocab_size, body)
    body = min(body, len(pool))  # a small vocabulary (the shipped induction model's 43 tokens): shorter probes
    if body < 6:
        raise InputError(f"the detectors' probes need at least 6 distinct ordinary tokens in {model.name}'s "
                         f"vocabulary and 6 positions; it has {len(pool)} and {model.max_positions}")
    return make_probes(pool, prefix, suffix, body, decoder=model.default_mask == "causal", seed=seed)


def detect(model, seed: int = PROBE_SEED, should_stop: Callable[[], bool] | None = None,
           weights_of: Callable[[Probe], np.ndarray] | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Every detector's ``(L, h)`` scores for ``model`` (NaN where a detector does not apply).
    ``weights_of(probe) -> (L, h, n, n)``: how to get the weights (default: the model's own pass,
    the probes of one length as one batch, models/pretrained/batch_weights.py)."""
    probes = model_probes(model, seed)
    shape = (model.num_layers, model.num_heads)
    sums = {name: np.zeros(shape) for name in DETECTORS}
    counts = dict.fromkeys(DETECTORS, 0)
    for probe in probes:
        for name in detectors_on(probe.kind):
            counts[name] += 1
    if weights_of is None:  # in torch where the weights are (models/reads/atlas_metrics.py), one copy at the end
        import torch

        from models.engine.host import to_numpy
        from models.pretrained.batch_weights import batch_layer_weights
        from models.reads.atlas_metrics import detector_scores

        held = torch.zeros((len(DETECTORS), *shape), dtype=torch.float64, device=getattr(model, "device", "cpu"))
        patterns = [{name: make(p.ids) for name, (k, make) in PATTERNS.items() if k == p.kind} for p in probes]

        def add(layer: int, indices, weights) -> None:  # weights (b, h, n, n), on the model's device
            for i, a in zip(indices, weights, strict=True):
                for name, score in detector_scores(probes[i].kind, a, probes[i], patterns[i]).items():
                    held[DETECTORS.index(name), layer] += score.to(held.device)

        batch_layer_weights(model, [model.encode_ids(p.ids) for p in probes], add, should_stop, on_device=True)
        sums = dict(zip(DETECTORS, to_numpy(held), strict=True))
    else:
        for probe in probes:
            for name, score in scores_on(probe.kind, weights_of(probe), probe).items():
                sums[name] += score
    return {name: sums[name] / counts[name] if counts[name] else np.full(shape, np.nan) for name in DETECTORS}
