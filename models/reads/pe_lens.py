"""The maths behind the positional-encoding lens (numpy only; the widget only draws).

The study notes' sinusoidal encoding ``P[i, 2j] = sin(i ω_j)``, ``P[i, 2j+1] = cos(i ω_j)`` with
``ω_j = 1 / 10000^(2j/d)``, and its relative-position property: for every offset δ the pair
``(P[i+δ, 2j], P[i+δ, 2j+1])`` is the fixed rotation ``R(δ ω_j)`` of ``(P[i, 2j], P[i, 2j+1])``,
whatever i is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def frequencies(d: int) -> np.ndarray:
    """``ω_j = 1/10000^(2j/d)`` for every pair j that has both a sin and a cos column: ``(d//2,)``."""
    two_j = np.arange(0, 2 * (d // 2), 2, dtype=np.float64)
    return 1.0 / np.power(10000.0, two_j / d)


def encoding(n: int, d: int, dtype=np.float32) -> np.ndarray:
    """``(n, d)``: the encoding as the engine stores it (computed in float64, kept as ``dtype``)."""
    pos = np.arange(n, dtype=np.float64)[:, None]  # (n, 1)
    angle = pos / np.power(10000.0, np.arange(0, d, 2, dtype=np.float64) / d)  # (n, ceil(d/2))
    p = np.empty((n, d), dtype=np.float64)
    p[:, 0::2] = np.sin(angle)
    p[:, 1::2] = np.cos(angle[:, : d // 2])
    return p.astype(dtype)


def default_columns(d: int, n: int = 60) -> list[int]:
    """The notes plot columns 6–9 (of d = 32, over 60 positions); a shorter sentence or a small d
    shows the first (fastest) columns, which still turn within its positions."""
    return list(range(6, 10)) if d >= 10 and n >= 30 else list(range(min(d, 4)))


def similarity(p: np.ndarray) -> np.ndarray:
    """``P Pᵀ`` ``(n, n)``: large near the diagonal, since nearby positions have similar rows."""
    p = p.astype(np.float64)
    return p @ p.T


def rotations(delta: int, d: int) -> np.ndarray:
    """``R(δ ω_j)`` for every pair, ``(d//2, 2, 2)``, acting on the column vector (sin, cos)."""
    phi = delta * frequencies(d)
    c, s = np.cos(phi), np.sin(phi)
    return np.stack([np.stack([c, s], -1), np.stack([-s, c], -1)], -2)


@dataclass(frozen=True)
class RelativeCheck:
    delta: int
    angles: np.ndarray  # (pairs,) δ·ω_j in radians
    errors: np.ndarray  # (pairs,) max over i of |R(δ ω_j)·P[i] − P[i+δ]| for pair j
    positions: int  # how many positions i have a partner i+δ inside the sequence

    @property
    def largest(self) -> float:
        return float(self.errors.max()) if self.errors.size and self.positions else 0.0

    @property
    def worst_pair(self) -> int:
        return int(np.argmax(self.errors)) if self.errors.size else 0


def relative_check(p: np.ndarray, delta: int) -> RelativeCheck:
    """Rotate every pair of every row i by ``δ ω_j`` and compare with row ``i + δ``."""
    n, d = p.shape
    pairs = d // 2
    lo, hi = max(0, -delta), min(n, n - delta)  # rows i with 0 <= i + δ < n
    if hi <= lo or pairs == 0:
        return RelativeCheck(delta, delta * frequencies(d), np.zeros(pairs), 0)
    x = p[lo:hi, : 2 * pairs].astype(np.float64).reshape(hi - lo, pairs, 2)  # (m, pairs, (sin, cos))
    y = p[lo + delta : hi + delta, : 2 * pairs].astype(np.float64).reshape(hi - lo, pairs, 2)
    turned = np.einsum("jab,mjb->mja", rotations(delta, d), x)  # (m, pairs, 2)
    errors = np.abs(turned - y).max(axis=(0, 2))  # (pairs,)
    return RelativeCheck(delta, delta * frequencies(d), errors, hi - lo)
