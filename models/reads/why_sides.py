"""One head's query and key sources in head space, and the table of their terms (models.reads.why).

Kept apart from models/reads/why.py so that the modules that build the sources (why_stream, why_encdec)
and the one that answers (why) import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.config import InputError

MAX_BYTES = 2 << 30  # sources × rows × d_model in float64, held at once


class TooManySources(InputError):
    """The sources of the rows asked for do not fit :data:`MAX_BYTES` (one cell still may)."""


def check_size(sources: int, rows: int, width: int) -> None:
    if sources * rows * width * 8 > MAX_BYTES:
        fit = MAX_BYTES // (sources * width * 8)
        raise TooManySources(f"why: {sources} sources × {rows:,} key rows are too many to hold; at most {fit:,} "
                             f"key rows fit (a query row seeing that many keys: under a causal mask row {fit - 1:,} "
                             "or an earlier one); split one cell, or use fewer tokens")  # fmt: skip


@dataclass(frozen=True)
class Sides:
    """One head's query sources at one row and key sources at one or more key rows, in head space.

    ``query (A, d_k)``: ``q_i^a``; ``keys (n_keys, B, d_k)``: ``k_j^b`` for the key rows ``cols``;
    ``bilinear (d_k, d_k)`` or None: the general score's W_g."""

    query_names: tuple[str, ...]
    key_names: tuple[str, ...]
    query: np.ndarray
    keys: np.ndarray
    cols: tuple[int, ...]
    scale: float
    bilinear: np.ndarray | None = None
    additive: np.ndarray | None = None  # (n_keys,): a term added to the score (T5's position bias)
    additive_name: str = ""
    # (d_k,) and (n_keys, d_k) or None: the magnitudes of the float32 products that made each q_i[d] and
    # k_j[d] (the toy's Σ_a |x^a| @ |W| + |b|), when the sources are known before the projection;
    # else the head-space sources' own (Σ_a |q_i^a[d]|): what :meth:`size` multiplies.
    query_size: np.ndarray | None = None
    key_size: np.ndarray | None = None

    @property
    def query_labels(self) -> list[str]:
        return list(self.query_names) + ([self.additive_name] if self.additive is not None else [])

    @property
    def key_labels(self) -> list[str]:
        return list(self.key_names) + ([self.additive_name] if self.additive is not None else [])

    def size(self, key_weights: np.ndarray) -> float:
        """``Σ_j |c_j| · |scale| · Σ_d (Σ_a |q_i^a[d]|) (Σ_b |k_j^b[d]|)`` (through ``|W_g|`` for the general
        score), plus ``Σ_j |c_j| |additive_j|``: the size of every product float32 adds to make the
        scores, before any cancellation between sources or dimensions. Float32's rounding of a score
        is bounded relative to this, not to the score, nor to the sum of the table's |terms|
        (:func:`models.reads.why.check_sum`)."""
        c = np.abs(np.asarray(key_weights, dtype=np.float64))  # (n_keys,)
        q = np.maximum(np.abs(self.query).sum(0), 0 if self.query_size is None else self.query_size)  # (d_k,)
        if self.bilinear is not None:
            q = q @ np.abs(self.bilinear)
        k = np.abs(self.keys).sum(1)  # (n_keys, d_k)
        if self.key_size is not None:
            k = np.maximum(k, self.key_size)
        size = abs(self.scale) * float(c @ (k @ q))
        return size + (float(c @ np.abs(self.additive)) if self.additive is not None else 0.0)

    def table(self, key_weights: np.ndarray) -> np.ndarray:
        """``Σ_j c_j T_j`` for coefficients ``c (n_keys,)`` over the key rows: ``(A, B)`` float64, with
        one more row and column (their corner the term itself) when the score has an additive term."""
        k = np.einsum("j,jbd->bd", key_weights, self.keys)  # (B, d_k)
        q = self.query if self.bilinear is None else self.query @ self.bilinear
        table = self.scale * (q @ k.T)
        if self.additive is None:
            return table
        out = np.zeros((table.shape[0] + 1, table.shape[1] + 1))
        out[:-1, :-1] = table
        out[-1, -1] = float(key_weights @ self.additive)
        return out
