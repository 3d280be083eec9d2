"""Peaks kept at the pixels they are drawn on: the block maximum, and peaks enlarged to 3 × 3 pixels.

:func:`block_max` is the one peak reduction (issue 45): every view's pixels are made by it, a numpy
array's here (the model view's thumbnails, the focus panel's bars: :func:`block_peaks`) and a torch
tensor's on the trace's device (models.engine.reduce's bands, models.engine.long_rows' overview of a long
input), with the same rule: each block of ``kr × kc`` cells its largest value, NaN spreading, partial
blocks at the edges. This module imports no torch (the widgets call it): a tensor is reduced by its own
methods, and by torch's pooling, found among the loaded modules, where that is faster.
:func:`enlarge_peaks` makes a pixel that holds a block's peak at least ``ENLARGE × ENLARGE`` pixels so
that one weight of 1 among a million is seen.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

ENLARGE = 3  # a peak whose cell is smaller than a pixel is drawn at least ENLARGE × ENLARGE pixels


def block_step(size: int, pixels: int) -> int:
    """Cells per pixel along one side: the fewest whole cells that fit ``size`` into ``pixels``."""
    return max(1, -(-size // max(1, pixels)))


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")  # loaded by whoever made a tensor; never imported here
    return torch is not None and isinstance(x, torch.Tensor)


def _amax(x: Any, axis: int, keep: bool = False) -> Any:
    return x.amax(dim=axis, keepdim=keep) if _is_tensor(x) else x.max(axis=axis, keepdims=keep)


def _take(x: Any, a: int, b: int, axis: int) -> Any:
    return x[..., a:b] if axis == -1 else x[..., a:b, :]


def _whole_blocks(x: Any, k: int, axis: int) -> Any:
    """``x`` whose length along ``axis`` (−1 or −2) is a multiple of ``k``: the max of each ``k`` cells."""
    n = x.shape[axis]
    if axis == -2:  # a reduction over a middle axis, the contiguous rows beside it: fast in both
        return _amax(x.reshape(*x.shape[:-2], n // k, k, x.shape[-1]), -2)
    if _is_tensor(x) and k < 64:  # torch's reduction over a short last axis is slow (4.6 ms for 256 × 2048
        pool = sys.modules["torch"].nn.functional.max_pool1d  # cells at k = 16; max_pool1d 1.2 ms)
        return pool(x.reshape(-1, 1, n), k, k).reshape(*x.shape[:-1], n // k)
    return _amax(x.reshape(*x.shape[:-1], n // k, k), -1)


def _fold(x: Any, k: int, lead: int, axis: int) -> Any:
    """``x`` reduced along ``axis`` by blocks of ``k`` cells, the first block ``lead`` cells short (its
    other cells lie before ``x``), the last one partial if need be."""
    n = x.shape[axis]
    if k == 1 or n == 0:
        return x
    first = min(n, (k - lead % k) % k)  # the cells of a partial first block
    whole = (n - first) // k * k
    parts = []
    if first:
        parts.append(_amax(_take(x, 0, first, axis), axis, keep=True))
    if whole:
        parts.append(_whole_blocks(_take(x, first, first + whole, axis), k, axis))
    if first + whole < n:
        parts.append(_amax(_take(x, first + whole, n, axis), axis, keep=True))
    if len(parts) == 1:
        return parts[0]
    return sys.modules["torch"].cat(parts, dim=axis) if _is_tensor(x) else np.concatenate(parts, axis=axis)


def block_max(x: Any, kr: int, kc: int, lead: tuple[int, int] = (0, 0)) -> Any:
    """``x (..., r, c)`` (a numpy array, or a torch tensor on its device) reduced by blocks of ``kr × kc``
    cells, each its largest value: ``(..., ⌈(lead_r + r) / kr⌉, ⌈(lead_c + c) / kc⌉)``. ``lead``: the
    cells of the first block of rows and of columns that lie before ``x`` (a band of rows or a tile of
    keys starting inside a pixel); partial blocks at either end; NaN spreads. Columns (contiguous) first."""
    return _fold(_fold(x, kc, lead[1], -1), kr, lead[0], -2)


def block_peaks(a: np.ndarray, rows_px: int, cols_px: int) -> tuple[np.ndarray, tuple[int, int]]:
    """``a (..., r, c)`` reduced to at most ``rows_px × cols_px`` pixels, each the largest value of
    its block of cells (NaN spreads, partial blocks at the edges); and the step (cells per pixel)."""
    a = np.asarray(a, dtype=np.float32)
    r, c = a.shape[-2:]
    kr, kc = block_step(r, rows_px), block_step(c, cols_px)
    return block_max(a, kr, kc), (kr, kc)


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
