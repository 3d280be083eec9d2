"""Each head's signature and roles at one checkpoint, and heads matched between two checkpoints or
two models by an optimal assignment.

A head's **signature** is its attention maps on the detectors' probes (models/reads/detectors.py:
random tokens of the model's own vocabulary, repeated and copied), concatenated and centred, so the
similarity of two heads is the Pearson correlation of their maps. That needs the two models to
read the same probes (the same tokenizer); when they do not, a head's signature is its **profile**:
its detector scores and its metrics on the probes, each standardised over the heads of both models.

Matching is per layer: the heads of layer ``l`` of A against those of layer ``l`` of B, by
``scipy.optimize.linear_sum_assignment`` on the similarity (maximised), so a head that is renumbered
between two models (or two checkpoints) is recognised, and the similarity of each pair is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.reads.detectors import DETECTORS, PROBE_SEED, model_probes, scores_on
from models.reads.survey import METRIC_NAMES, head_metrics


@dataclass
class HeadSignatures:
    """What one checkpoint's heads do on the probes."""

    maps: np.ndarray  # (L, h, F) float32: each head's maps on every probe, flattened and centred
    detectors: dict[str, np.ndarray]  # name -> (L, h), models.reads.detectors' scores
    metrics: dict[str, np.ndarray]  # name -> (L, h), models.reads.survey's metrics, mean over the probes
    probe_ids: tuple[tuple[int, ...], ...]  # the probes' token ids (two signatures compare maps only if equal)

    @property
    def shape(self) -> tuple[int, int]:
        return self.maps.shape[0], self.maps.shape[1]

    def profile(self) -> np.ndarray:
        """(L, h, P): detector scores then metrics (NaN as 0), for models whose probes differ."""
        cols = [self.detectors[d] for d in DETECTORS] + [self.metrics[m] for m in METRIC_NAMES]
        return np.nan_to_num(np.stack(cols, axis=-1).astype(np.float64))


def head_signatures(model, seed: int = PROBE_SEED) -> HeadSignatures:
    """Run the probes once (texts of one length as one batch) and keep every head's maps."""
    from models.config import InputError
    from models.pretrained.batch_weights import batch_layer_weights
    from models.pretrained.registry import ENCODER_DECODER_TYPES

    if model.model_type in ENCODER_DECODER_TYPES:  # was an AttributeError (no encode_ids)
        raise InputError(f"the time machine follows the heads of encoder or decoder models; {model.name} is an "
                         f"encoder-decoder model ({', '.join(ENCODER_DECODER_TYPES)})")
    probes = model_probes(model, seed)
    L, h = model.num_layers, model.num_heads
    per_probe: list[list[np.ndarray | None]] = [[None] * L for _ in probes]

    def add(layer: int, indices, weights: np.ndarray) -> None:  # weights (b, h, n, n)
        for i, a in zip(indices, weights, strict=True):
            per_probe[i][layer] = np.asarray(a, dtype=np.float32)

    batch_layer_weights(model, [model.encode_ids(p.ids) for p in probes], add)
    stacked = [np.stack(layers) for layers in per_probe]  # each (L, h, n, n)
    sums = {name: np.zeros((L, h)) for name in DETECTORS}
    counts = dict.fromkeys(DETECTORS, 0)
    metric_sums = {m: np.zeros((L, h)) for m in METRIC_NAMES}
    for probe, A in zip(probes, stacked, strict=True):
        for name, score in scores_on(probe.kind, A, probe).items():
            sums[name] += score
            counts[name] += 1
        for m, value in head_metrics(A).items():
            if m in metric_sums:
                metric_sums[m] += np.nan_to_num(value)
    detectors = {d: sums[d] / counts[d] if counts[d] else np.full((L, h), np.nan) for d in DETECTORS}
    metrics = {m: metric_sums[m] / len(probes) for m in METRIC_NAMES}
    flat = np.concatenate([A.reshape(L, h, -1) for A in stacked], axis=-1)
    maps = (flat - flat.mean(axis=-1, keepdims=True)).astype(np.float32)
    return HeadSignatures(maps, detectors, metrics, tuple(p.ids for p in probes))


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(h_a, F) × (h_b, F) -> (h_a, h_b) cosine similarities (0 where a vector is zero)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    na = np.linalg.norm(a, axis=-1, keepdims=True)
    nb = np.linalg.norm(b, axis=-1, keepdims=True)
    return (a / np.where(na > 0, na, 1)) @ (b / np.where(nb > 0, nb, 1)).T


def similarity(a: HeadSignatures, b: HeadSignatures) -> tuple[np.ndarray, str]:
    """``(S (L, h_a, h_b), basis)``: the heads' similarity layer by layer, and what it compares
    ("maps" when both read the same probes, else "profile")."""
    if a.shape[0] != b.shape[0]:
        from models.config import InputError

        raise InputError(f"cannot match heads of a {a.shape[0]}-layer model with a {b.shape[0]}-layer one")
    if a.probe_ids == b.probe_ids and a.maps.shape[-1] == b.maps.shape[-1]:
        return np.stack([_cosine(a.maps[layer], b.maps[layer]) for layer in range(a.shape[0])]), "maps"
    pa, pb = a.profile(), b.profile()
    both = np.concatenate([pa.reshape(-1, pa.shape[-1]), pb.reshape(-1, pb.shape[-1])])
    mean, sd = both.mean(axis=0), both.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    za, zb = (pa - mean) / sd, (pb - mean) / sd
    return np.stack([_cosine(za[layer], zb[layer]) for layer in range(a.shape[0])]), "profile"


@dataclass(frozen=True)
class HeadMatch:
    """``match[l, i]``: the head of B that head ``i`` of A's layer ``l`` is; ``score[l, i]`` its similarity."""

    match: np.ndarray  # (L, h_a) int, -1 where A has more heads than B
    score: np.ndarray  # (L, h_a) float
    basis: str  # "maps" or "profile"


def match_heads(a: HeadSignatures, b: HeadSignatures, same_bonus: float = 0.0) -> HeadMatch:
    """Each layer's heads of ``a`` matched to ``b``'s by an optimal assignment (maximum total
    similarity). ``same_bonus``: added to keeping a head's number (consecutive checkpoints, where
    near-uniform heads early in training are all alike and would otherwise swap at random); the
    similarities reported are the real ones."""
    from scipy.optimize import linear_sum_assignment

    S, basis = similarity(a, b)
    L, ha = S.shape[0], S.shape[1]
    match = np.full((L, ha), -1, dtype=int)
    score = np.full((L, ha), np.nan)
    for layer in range(L):
        rows, cols = linear_sum_assignment(S[layer] + same_bonus * np.eye(S.shape[1], S.shape[2]), maximize=True)
        match[layer, rows] = cols
        score[layer, rows] = S[layer, rows, cols]
    return HeadMatch(match, score, basis)


def follow(matches: list[HeadMatch]) -> np.ndarray:
    """``ids[s, l, i]``: which head of step ``s`` is head ``i`` of step 0, following the matches of
    consecutive steps (``matches[s]`` matches step s to step s + 1); -1 once a head is lost."""
    if not matches:
        return np.zeros((1, 0, 0), dtype=int)
    L, h = matches[0].match.shape
    ids = np.empty((len(matches) + 1, L, h), dtype=int)
    ids[0] = np.arange(h)[None, :]
    for s, m in enumerate(matches):
        prev = ids[s]
        ids[s + 1] = np.where(prev >= 0, np.take_along_axis(m.match, np.clip(prev, 0, None), axis=1), -1)
    return ids
