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
        raise TooManySources(f"why: {sources} sources × {rows} rows are too many to hold; split one cell, "
                             "or use fewer tokens")  # fmt: skip


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

    @property
    def query_labels(self) -> list[str]:
        return list(self.query_names) + ([self.additive_name] if self.additive is not None else [])

    @property
    def key_labels(self) -> list[str]:
        return list(self.key_names) + ([self.additive_name] if self.additive is not None else [])

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
