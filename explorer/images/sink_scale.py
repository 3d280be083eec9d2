"""Attention sinks out of the colour scale (numpy only; views and workers may import it).

Many decoder heads park most of their weight on the first token (an "attention sink"): coloured
from 0 to the largest weight, such a head shows one bright column and every other weight dark.
:func:`first_key_out_of_scale` clips the first key's column to the largest weight of the other
keys of the same head, so the colour scale is set by the rest; the first column then shows
saturated, and hover still reads the exact values from the unclipped matrix.
"""

from __future__ import annotations

import numpy as np


def first_key_out_of_scale(a: np.ndarray) -> np.ndarray:
    """``a (..., n_q, n_k)`` -> a copy whose key column 0 is at most the largest weight of
    columns 1.. of the same matrix (unchanged when there is only one key)."""
    a = np.asarray(a, dtype=np.float32)
    if a.shape[-1] < 2:
        return a.copy()
    rest = np.nanmax(a[..., 1:], axis=(-2, -1), keepdims=True)  # (..., 1, 1)
    out = a.copy()
    out[..., :, :1] = np.minimum(a[..., :, :1], rest)
    return out
