"""Heads -> small uint8 thumbnails for the model view (numpy only: runs on the worker or the GUI).

A thumbnail is at most ``THUMB`` pixels a side. Larger matrices are reduced as every view reduces
them (models.pixels: each pixel its block's largest weight, peaks enlarged to 3 × 3 pixels), and
coloured with the one index layout of explorer.stage_image (0..126 the colour map, 254 NaN), so
the model view's thumbnails paint exactly as the stepper's heatmaps.
"""

from __future__ import annotations

import numpy as np

from models.pixels import block_peaks, enlarge_peaks

from .stage_image import MASKED_INDEX, to_indices

THUMB = 64
EMPTY_INDEX = MASKED_INDEX  # gaps between thumbnails and layers not computed yet (weights are never −∞)


def thumbnail_indices(a: np.ndarray, fit_each: bool = True, side: int = THUMB) -> np.ndarray:
    """``a (h, n_q, n_k)`` weights -> ``(h, t_q, t_k)`` uint8 colour indices (stage_image's layout).

    ``fit_each``: each head from 0 to its own largest weight (so diffuse heads stay visible);
    otherwise 0 to 1 for all. NaN becomes stage_image's NaN index."""
    a = np.asarray(a, dtype=np.float32)
    n_q, n_k = a.shape[-2:]
    side_q = side_k = side
    if max(n_q, n_k) > side:  # both sides by the same step, so a thumbnail keeps the matrix's shape
        step = -(-max(n_q, n_k) // side)
        side_q, side_k = -(-n_q // step), -(-n_k // step)
    small, step = block_peaks(a, side_q, side_k)
    if step != (1, 1):
        small = enlarge_peaks(small, signed=False)
    out = np.empty(small.shape, dtype=np.uint8)
    for h in range(small.shape[0]):
        top = 1.0
        if fit_each:
            finite = small[h][np.isfinite(small[h])]
            top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        out[h], _ = to_indices(small[h], None, (0.0, top), log=False)
    return out
