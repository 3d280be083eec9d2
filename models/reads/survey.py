"""The whole model at once: every layer's weights, head metrics and attention rollout.

numpy (plus the model's own torch forward pass in :func:`all_layer_weights`); no Qt.

Definitions (``METRICS_VERSION`` 2: 1 plus ``sink``), for one head's weights ``A`` (n_q × n_k, rows = queries):

- ``entropy``    = mean over query rows i of ``−Σ_j a_ij ln a_ij`` (natural log, ``0 ln 0 = 0``)
- ``max_weight`` = mean over i of ``max_j a_ij``
- ``self``       = mean over i of ``a_ii``
- ``previous``   = mean over i ≥ 1 of ``a_i,i−1``
- ``first``      = mean over i of ``a_i,0``
- ``distance``   = mean over i of ``Σ_j a_ij |i − j|``
- ``sink``       = mean over i ≥ 1 of ``a_i,0``: the share of attention parked on the sequence's first
  token (an attention sink; row 0 is left out, where a decoder's first token sees only itself).
  Cross attention: mean over every row i of ``a_i,0``.
- rollout: ``Â_l = 0.5 · mean_heads(A_l) + 0.5 · I``, each row divided by its sum;
  ``R_0 = Â_0``, ``R_l = Â_l · R_{l−1}``.

Leaving tokens out (``keep``, a boolean mask over the tokens, True = keep): the rows and the key
columns of the tokens left out are dropped, and the same formulas run over the remaining
sub-matrix, whose rows and columns are RE-INDEXED 0..m−1. So ``first`` is the weight on the first
token kept, ``previous`` the weight on the previous token kept, ``distance`` counts kept tokens;
``sink`` stays the weight on the sequence's own first token (even when left out), over the rows kept.
Rows are NOT renormalised: the weight a head puts on a dropped token simply leaves the sums.

Cross attention (n_q ≠ n_k): query and key positions are not the same sequence, so ``self``,
``previous`` and ``distance`` are NaN, and there is no rollout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

METRICS_VERSION = 2
METRIC_NAMES = ("entropy", "max_weight", "self", "previous", "first", "distance", "sink")
DEFINITIONS = {
    "entropy": "mean over query rows i of -sum_j a_ij ln a_ij (natural log, 0 ln 0 = 0)",
    "max_weight": "mean over i of max_j a_ij",
    "self": "mean over i of a_ii",
    "previous": "mean over i >= 1 of a_i,i-1",
    "first": "mean over i of a_i,0",
    "distance": "mean over i of sum_j a_ij |i - j|",
    "sink": "mean over i >= 1 of a_i,0 (the sequence's first token, also when left out; cross attention: all i)",
    "rollout": "A^_l = 0.5 mean_heads(A_l) + 0.5 I, rows divided by their sums; R_0 = A^_0, R_l = A^_l R_(l-1)",
    "keep": "tokens left out: their rows and key columns dropped, positions re-indexed, rows not renormalised",
}
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "<s>", "</s>", "<|endoftext|>", "<|begin_of_text|>"})


def special_token_mask(tokens, decoder: bool = False) -> np.ndarray:
    """``(n,)`` bool, True for special tokens (and, for a decoder, the first token)."""
    special = np.array([t in SPECIAL_TOKENS for t in tokens], dtype=bool)
    if decoder and len(special):
        special[0] = True
    return special


def _check_keep(keep, n_q: int, n_k: int) -> np.ndarray | None:
    if keep is None:
        return None
    keep = np.asarray(keep, dtype=bool)
    if n_q != n_k or keep.shape != (n_q,):
        raise ValueError(f"keep must be a ({n_q},) mask of a square attention, got {keep.shape} for {n_q}×{n_k}")
    return keep


def _metrics_block(a: np.ndarray) -> dict[str, np.ndarray]:
    """The six metrics of ``a (..., n_q, n_k)`` in float64, over the leading axes."""
    n_q, n_k = a.shape[-2:]
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), np.where(a == 0, 0.0, np.nan))
    out = {
        "entropy": -plogp.sum(-1).mean(-1),
        "max_weight": a.max(-1).mean(-1),
        "first": a[..., :, 0].mean(-1),
        "sink": sink_share(a),
    }
    if n_q == n_k:
        i = np.arange(n_q)
        distance = np.abs(i[:, None] - i[None, :]).astype(np.float64)  # (n, n): |i - j|
        out["self"] = np.diagonal(a, axis1=-2, axis2=-1).mean(-1)
        prev = np.diagonal(a, offset=-1, axis1=-2, axis2=-1)  # (..., n-1): a_i,i-1 for i >= 1
        out["previous"] = prev.mean(-1) if n_q > 1 else np.full(a.shape[:-2], np.nan)
        out["distance"] = (a * distance).sum(-1).mean(-1)
    else:
        for name in ("self", "previous", "distance"):
            out[name] = np.full(a.shape[:-2], np.nan)
    return {name: out[name] for name in METRIC_NAMES}


def sink_share(a: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """``sink`` of ``a (..., n_q, n_k)``: the mean weight on key 0 over query rows 1.. (square;
    only the rows ``keep`` keeps), or over every row (cross attention); NaN without such a row."""
    n_q, n_k = a.shape[-2:]
    rows = np.arange(n_q)
    if n_q == n_k:
        rows = rows[1:] if keep is None else rows[1:][keep[1:]]
    if len(rows) == 0 or n_k == 0:
        return np.full(a.shape[:-2], np.nan)
    return a[..., rows, 0].mean(-1)


def head_metrics(A: np.ndarray, keep=None) -> dict[str, np.ndarray]:
    """The metrics of every head: ``A (..., n_q, n_k)`` -> {name: array of shape A.shape[:-2]}.

    Vectorised over the heads of one layer at a time (float64), so an (L, h, n, n) memory map is
    read once and never copied whole. ``keep``: see the module docstring.
    """
    A = np.asarray(A)  # a memory map stays one (no copy)
    if A.ndim < 2:
        raise ValueError(f"attention must have at least 2 axes (n_q, n_k), got shape {A.shape}")
    n_q, n_k = A.shape[-2:]
    keep = _check_keep(keep, n_q, n_k)
    lead = A.shape[:-2]
    flat = A.reshape((-1, n_q, n_k)) if A.ndim != 3 else A
    result = {name: np.empty(flat.shape[0], dtype=np.float64) for name in METRIC_NAMES}
    # Bounded temporaries (~8 MB of float64), and short steps: some numpy calls here (np.where)
    # keep the interpreter lock throughout, which the window's thread then waits for.
    chunk = max(1, 1_000_000 // max(1, n_q * n_k))
    for start in range(0, flat.shape[0], chunk):
        a = np.asarray(flat[start : start + chunk], dtype=np.float64)
        sink = sink_share(a, keep)  # on the whole matrix: the sequence's own first token
        if keep is not None:
            a = a[:, keep][:, :, keep]
        if a.shape[-1] == 0 or a.shape[-2] == 0:
            block = {name: np.full(a.shape[0], np.nan) for name in METRIC_NAMES}
        else:
            block = _metrics_block(a)
        block["sink"] = sink
        for name in METRIC_NAMES:
            result[name][start : start + chunk] = block[name]
    return {name: values.reshape(lead) for name, values in result.items()}


def norm_shares(norms: np.ndarray) -> np.ndarray:
    """Weighted norms ``‖a_ij f_h(x_j)‖ (..., n_q, n_k)`` as each row's shares (rows divided by their
    sums, in place; an all-zero row stays 0): what the model view's metrics and rollout read when it
    shows weighted norms, so that every formula above applies to them as to weights."""
    total = norms.sum(-1, keepdims=True)
    np.divide(norms, total, out=norms, where=total > 0)
    return norms


def rollout(A: np.ndarray) -> np.ndarray:
    """Attention rollout ``(L, n, n)`` of ``A (L, h, n, n)``: ``R_l`` at index l (float32)."""
    A = np.asarray(A)  # a memory map stays one (no copy)
    if A.ndim != 4 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"rollout needs square attention (L, h, n, n), got shape {A.shape}")
    L, _, n, _ = A.shape
    out = np.empty((L, n, n), dtype=np.float32)
    eye = np.eye(n)
    r = None
    for layer in range(L):
        a_hat = 0.5 * np.asarray(A[layer], dtype=np.float64).mean(0) + 0.5 * eye  # (n, n)
        a_hat /= a_hat.sum(-1, keepdims=True)
        r = a_hat if r is None else a_hat @ r
        out[layer] = r
    return out


def all_layer_weights(
    model,
    sentence: str,
    mask: str | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_layer: Callable[[int, np.ndarray], None] | None = None,
    out: np.ndarray | None = None,
    max_tokens: int | None = None,
) -> tuple[list[str], np.ndarray]:
    """``(tokens, A (L, h, n, n) float32)`` of a :class:`PretrainedModel`, in one forward pass;
    ``on_layer(l, A_l)`` as each layer arrives. ``out``: where to write (e.g. a memory map)."""
    enc, weights, _notices = model.layer_weights(
        sentence, mask=mask, should_stop=should_stop, on_layer=on_layer, out=out, max_tokens=max_tokens
    )
    return list(enc.tokens), weights


@dataclass
class Survey:
    """Everything the model view, the metrics table and the rollout view show."""

    weights: np.ndarray  # (L, h, n_q, n_k) float32
    query_tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    source: str  # the model's name or the file's path
    decoder: bool = False  # the first token counts as special
    warnings: list[str] = field(default_factory=list)
    metrics: dict[str, np.ndarray] = field(default_factory=dict)  # (L, h) each, all tokens
    rollout: np.ndarray | None = None  # (L, n, n), None unless square self-attention
    # Queries of one sequence, keys of another (an encoder-decoder's cross block): never square
    # self-attention, whatever the lengths (a BART source and target of one length had a rollout).
    cross: bool = False

    @property
    def square(self) -> bool:
        """Self-attention, every query a key: what the rollout and the special-token toggle need."""
        return not self.cross and self.weights.shape[-1] == self.weights.shape[-2]

    @property
    def special(self) -> np.ndarray:
        """(n,) bool: tokens the 'leave out special tokens' toggle removes (square only)."""
        return special_token_mask(self.query_tokens, self.decoder)

    def metrics_for(self, leave_out_special: bool) -> dict[str, np.ndarray]:
        if not leave_out_special or not self.square:
            return self.metrics
        return head_metrics(self.weights, keep=~self.special)


def complete(survey: Survey) -> Survey:
    """Fill in the metrics (all tokens) and the rollout (square self-attention only)."""
    survey.metrics = head_metrics(survey.weights)
    survey.rollout = rollout(survey.weights) if survey.square else None
    return survey
