"""Previous-token and induction scores of every head: the training timeline's phase-change scores.

- ``previous``: :func:`models.reads.survey.head_metrics`' own (mean over i ≥ 1 of ``a_i,i−1``).
- ``induction``: over the queries i whose token occurred before (at j < i, special tokens aside), the
  weight on the tokens right after those earlier occurrences, ``Σ_j a_i,j+1``, averaged. On a block
  of random characters repeated twice these queries are exactly the second block's, so this is the
  mean over the second block of the weight on the token after the same token's earlier occurrence.

This is not TransformerLens's ``head_detector`` (the atlas's ``induction`` column, models/reads/detectors.py):
that one divides the same sum by every query row, the first block's (which cannot score) included, so
on this probe it gives about half (0.48 where this gives 0.98). Both are right; they are two scales.
"""

from __future__ import annotations

import numpy as np

from models.reads.survey import SPECIAL_TOKENS, head_metrics


def induction_targets(tokens) -> list[tuple[int, list[int]]]:
    """``[(query i, [j + 1 for each earlier occurrence j of token i])]`` for the queries that have one."""
    seen: dict[str, list[int]] = {}
    out = []
    for i, tok in enumerate(tokens):
        if tok in SPECIAL_TOKENS:
            continue
        if seen.get(tok):
            out.append((i, [j + 1 for j in seen[tok]]))
        seen.setdefault(tok, []).append(i)
    return out


def induction_scores(A: np.ndarray, tokens) -> np.ndarray:
    """``A (..., n, n)`` -> induction score per head (``A.shape[:-2]``), NaN when no token repeats."""
    A = np.asarray(A, dtype=np.float64)
    targets = induction_targets(tokens)
    if not targets:
        return np.full(A.shape[:-2], np.nan)
    per_query = [A[..., i, js].sum(-1) for i, js in targets]  # each A.shape[:-2]
    return np.mean(per_query, axis=0)


def head_scores(A: np.ndarray, tokens) -> dict[str, np.ndarray]:
    """``{"previous", "induction", and the six metrics of models.reads.survey}``, each ``A.shape[:-2]``."""
    metrics = head_metrics(A)
    return {"previous": metrics["previous"], "induction": induction_scores(A, tokens), **metrics}
