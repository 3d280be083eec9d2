"""Peaks kept at the pixels they are drawn on: the block maximum, and peaks enlarged to 3 × 3 pixels.

numpy only (the widgets may call it). models.engine.reduce reduces a whole stage band by band with the
same rule (:func:`block_step` blocks, each its largest value); here are the pieces every view
shares: an array in memory reduced to pixels (the model view's thumbnails, the focus panel's
bars) and :func:`enlarge_peaks`, which makes a pixel that holds a block's peak at least
``ENLARGE × ENLARGE`` pixels so that one weight of 1 among a million is seen.
"""

from __future__ import annotations

import numpy as np

ENLARGE = 3  # a peak whose cell is smaller than a pixel is drawn at least ENLARGE × ENLARGE pixels


def block_step(size: int, pixels: int) -> int:
    """Cells per pixel along one side: the fewest whole cells that fit ``size`` into ``pixels``."""
    return max(1, -(-size // max(1, pixels)))


def block_peaks(a: np.ndarray, rows_px: int, cols_px: int) -> tuple[np.ndarray, tuple[int, int]]:
    """``a (..., r, c)`` reduced to at most ``rows_px × cols_px`` pixels, each the largest value of
    its block of cells (NaN spreads, partial blocks at the edges); and the step (cells per pixel)."""
    a = np.asarray(a, dtype=np.float32)
    r, c = a.shape[-2:]
    kr, kc = block_step(r, rows_px), block_step(c, cols_px)
    if kr == kc == 1:
        return a, (1, 1)
    rows, cols = -(-r // kr), -(-c // kc)
    padded = np.full(a.shape[:-2] + (rows * kr, cols * kc), -np.inf, dtype=np.float32)
    padded[..., :r, :c] = a
    blocks = padded.reshape(a.shape[:-2] + (rows, kr, cols, kc))
    return blocks.max(axis=(-3, -1)), (kr, kc)


def reduce_row(values: np.ndarray, max_bars: int, signed: bool = False) -> tuple[np.ndarray, int]:
    """A row of weights as at most ``max_bars`` bars, each the largest weight of its keys (``signed``:
    the value of largest magnitude, so that a negative difference is kept); and the step."""
    row = np.asarray(values, dtype=np.float32)[None, :]
    peaks, (_, step) = block_peaks(row, 1, max_bars)
    if signed and step > 1:
        lows = -block_peaks(-row, 1, max_bars)[0]
        peaks = np.where(np.abs(lows) > np.abs(peaks), lows, peaks)
    return peaks[0], step


def _neighbourhood(x: np.ndarray, fill: float, pick) -> np.ndarray:
    """``pick`` (np.maximum / np.minimum) over each pixel's 3 × 3 neighbourhood of ``x (..., H, W)``:
    along each row, then along each column (the same extreme, in 4 passes rather than 9)."""
    h, w = x.shape[-2:]
    pad = ENLARGE // 2
    padded = np.full(x.shape[:-2] + (h + 2 * pad, w + 2 * pad), fill, dtype=x.dtype)
    padded[..., pad : pad + h, pad : pad + w] = x
    rows = padded[..., :, 0:w].copy()  # (..., H + 2, W): each pixel's row neighbours ...
    for d in range(1, ENLARGE):
        pick(rows, padded[..., :, d : d + w], out=rows)
    out = rows[..., 0:h, :].copy()  # ... then their column neighbours
    for d in range(1, ENLARGE):
        pick(out, rows[..., d : d + h, :], out=out)
    return out


def enlarge_peaks(peak: np.ndarray, signed: bool) -> np.ndarray:
    """``peak (..., H, W)`` with each pixel the most extreme value of its 3 × 3 neighbourhood (the
    largest for weights, the largest magnitude for signed values): a peak one pixel wide becomes
    a 3 × 3 square centred where it is. −∞ (masked) and NaN pixels stay what they are and do not
    spread."""
    x = np.asarray(peak, dtype=np.float32)
    if x.size == 0:
        return x.copy()
    special = np.isnan(x) | np.isneginf(x)
    any_special = bool(special.any())  # weights never are: two passes fewer for them
    high = _neighbourhood(np.where(special, -np.inf, x) if any_special else x, -np.inf, np.maximum)
    if signed:
        low = _neighbourhood(np.where(special, np.inf, x) if any_special else x, np.inf, np.minimum)
        low = np.where(np.isinf(low), high, low)
        high = np.where(np.isneginf(high), low, high)
        with np.errstate(invalid="ignore"):
            high = np.where(np.abs(low) > np.abs(high), low, high)
    return (np.where(special, x, high) if any_special else high).astype(np.float32, copy=False)
