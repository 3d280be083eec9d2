"""Heads -> small uint8 thumbnails for the model view (numpy only: runs on the worker or the GUI).

A thumbnail is at most ``THUMB`` pixels a side. Larger matrices are reduced by BLOCK MAX, not by
striding: every pixel shows the largest weight of the block of cells it covers, so a single sharp
peak (a head that looks at one token) is never dropped.
"""

from __future__ import annotations

import math

import numpy as np

THUMB = 64
COLOURS = 255  # indices 0..254: the colour map; 255: no data (NaN, gaps between thumbnails)
EMPTY_INDEX = 255


def block_max(a: np.ndarray, side: int = THUMB) -> np.ndarray:
    """``a (..., n_q, n_k)`` -> ``(..., ceil(n_q/b), ceil(n_k/b))`` with b chosen so both fit ``side``."""
    n_q, n_k = a.shape[-2:]
    b = max(1, math.ceil(max(n_q, n_k) / side))
    if b == 1:
        return a
    rows, cols = math.ceil(n_q / b), math.ceil(n_k / b)
    padded = np.full(a.shape[:-2] + (rows * b, cols * b), -np.inf, dtype=a.dtype)
    padded[..., :n_q, :n_k] = a
    blocks = padded.reshape(a.shape[:-2] + (rows, b, cols, b))
    return blocks.max(axis=(-3, -1))


def thumbnail_indices(a: np.ndarray, fit_each: bool = True, side: int = THUMB) -> np.ndarray:
    """``a (h, n_q, n_k)`` weights -> ``(h, t_q, t_k)`` uint8 colour indices.

    ``fit_each``: each head from 0 to its own largest weight (so diffuse heads stay visible);
    otherwise 0 to 1 for all. NaN becomes ``EMPTY_INDEX``."""
    small = block_max(np.asarray(a, dtype=np.float32), side)
    with np.errstate(invalid="ignore", divide="ignore"):
        if fit_each:
            top = np.where(np.isfinite(small), small, 0.0).max(axis=(-2, -1), keepdims=True)
            top = np.where(np.isfinite(top) & (top > 0), top, 1.0)
        else:
            top = 1.0
        scaled = np.clip(small / top, 0.0, 1.0) * (COLOURS - 1)
    out = np.where(np.isfinite(scaled), np.rint(np.nan_to_num(scaled)), EMPTY_INDEX)
    return out.astype(np.uint8)
