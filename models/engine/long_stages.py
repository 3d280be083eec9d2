"""A long store's stages besides its weights, reduced to pixels tile by tile (issue 50, point 1).

The weights of a long input stream (models.engine.long_rows): blocks of ``TILE_ROWS × TILE_KEYS``
scores computed into one reused buffer, each folded into the pixels at once. The other n×n stages
(``scores`` … ``masked``, ``weighted_norms``) were reduced from whole rows of the store's blocks: 256 ×
16,384 cells a block at 16,384 tokens (16 MiB, out of the cache), the keys no query of it sees filled
with −∞ first, then scanned again for the masked share and the lowest value: 2.5–3× the time of the
weights. Here they go the weights' way: the same tiles, into the same kind of reused buffer, only the
keys some query of the tile's rows sees computed (the others are −∞, or 0 after the mask, by
definition: their pixels are set from the mask's columns alone), and the masked cells counted only
where the mask can hide one (:meth:`MaskSpec.hidden_span`).

Each pixel holds what :func:`models.engine.reduce.reduce_head` puts there: its block's largest value
(and lowest visible one: the value of larger magnitude for a signed stage), the share of −∞ cells.
"""

from __future__ import annotations

import threading

import torch

from models.config import Cancelled
from models.engine import long_rows
from models.engine.pixels import block_max

INF = float("inf")
_buffers = threading.local()  # each thread's scratch buffer of scores (the GUI's hover may ask meanwhile)


def _scratch(cells: int, device: torch.device) -> torch.Tensor:
    have = getattr(_buffers, "cells", None)
    if have is None or have.numel() < cells or have.device != device:
        have = _buffers.cells = torch.empty(cells, dtype=torch.float32, device=device)
    return have[:cells]


def _block_sum(x: torch.Tensor, kr: int, kc: int, lead: tuple[int, int]) -> torch.Tensor:
    """``x (r, c)`` (counts: bool, or whole numbers) summed by blocks of ``kr × kc`` cells laid as
    :func:`block_max` lays them (``lead`` cells of the first block before ``x``, partial blocks at either
    end), float64 (summed in float32: exact below 2**24 cells, a tile holds far fewer)."""
    x = x.to(torch.float32)
    for axis, k, first in ((1, kc, lead[1]), (0, kr, lead[0])):
        n = x.shape[axis]
        ends = torch.arange(min(n, (k - first % k) % k or k), n, k, device=x.device)
        ends = torch.cat([ends, ends.new_tensor([n])]) if not len(ends) or int(ends[-1]) != n else ends
        total = x.cumsum(axis).index_select(axis, ends - 1)
        x = torch.diff(total, dim=axis, prepend=total.narrow(axis, 0, 1) * 0)
    return x.double()


def _fill_columns(c0: int, c1: int, v0: int, v1: int, kc: int, width: int, device) -> torch.Tensor:
    """Per pixel column of the region's keys ``c0:c1``, how many of its keys lie outside ``v0:v1``."""
    j = torch.arange(c0, c1, device=device)
    outside = ((j < v0) | (j >= v1)).double()
    pad = width * kc - outside.shape[0]
    return torch.cat([outside, outside.new_zeros(pad)]).view(width, kc).sum(1)


def reduce_tiles(store, name: str, head: int, region: tuple[int, int, int, int], step: tuple[int, int],
                 low_too: bool, count: bool = True, should_stop=None):  # fmt: skip
    """Stage ``name`` of ``head`` in ``region`` (rows r0:r1, keys c0:c1) at ``step`` cells a pixel, from
    tiles of Q and K: ``(largest (H, W), lowest visible (H, W) or None, −∞ cells per pixel (H, W) float64
    or None)``, the lowest only with ``low_too``, the −∞ cells only with ``count``; tensors on the trace's
    device (the caller makes the peaks and crosses to the host once)."""
    r0, r1, c0, c1 = region
    kr, kc = step
    height, width = -(-(r1 - r0) // kr), -(-(c1 - c0) // kc)
    device = store.spec.q.device
    mask, n_keys = store.spec.mask, store.n_keys
    after_mask = name not in store.score_stages  # from the mask on, unseen keys are −∞ (0 after the softmax)
    fill = -INF if name == "masked" else 0.0
    top = torch.full((height, width), -INF, device=device)
    low = torch.full((height, width), INF, device=device) if low_too else None
    hidden = torch.zeros((height, width), dtype=torch.float64, device=device) if count and fill == -INF else None
    size = max(1, long_rows.TILE_KEYS * (long_rows.GPU_KEYS if device.type == "cuda" else 1) // kc) * kc
    rows = long_rows.TILE_ROWS // kr * kr if kr <= long_rows.TILE_ROWS else long_rows.TILE_ROWS
    s = r0
    with torch.no_grad():
        while s < r1:
            if should_stop is not None and should_stop():
                raise Cancelled(name)
            e = min(r1, s + rows, r0 + ((s - r0) // kr + 1) * kr if kr > rows else r1)  # within a pixel row
            p0, lead_r = (s - r0) // kr, (s - r0) % kr
            v0, v1 = mask.visible_columns(s, e, n_keys) if after_mask else (0, n_keys)
            v0 = max(c0, v0)
            v1 = max(v0, min(c1, n_keys, v1))
            if after_mask and (v0, v1) != (c0, min(c1, n_keys)) and (fill == 0.0 or hidden is not None):
                _fold_fill(top, low, hidden, p0, lead_r, e - s, kr, (c0, min(c1, n_keys), v0, v1), kc, fill)
            buffer = _scratch((e - s) * size, device)
            for a in range(c0 + (v0 - c0) // size * size, v1, size):
                a, b = max(v0, a), min(v1, a + size)
                out = buffer[: (e - s) * (b - a)].view(e - s, b - a)
                x = store.region_block(name, head, s, e, a, b, sink=False, out=out).to(torch.float32)[:, : b - a]
                store.check_tile(name, head, s, a, x)
                h0, h1 = mask.hidden_span(s, e, a, b)
                _fold(top, low, hidden if hidden is not None and h1 > h0 else None, x, p0, (lead_r, (a - c0) % kc),
                      (a - c0) // kc, kr, kc)  # fmt: skip
            if c1 > n_keys:  # a learned sink's column, last
                x = store.region_block(name, head, s, e, n_keys, n_keys).to(torch.float32)  # (r, 1): the sink's
                store.check_tile(name, head, s, n_keys, x)
                _fold(top, low, None, x, p0, (lead_r, (n_keys - c0) % kc), (n_keys - c0) // kc, kr, kc)
            s = e
    return top, low, hidden


def _fold(top, low, hidden, x: torch.Tensor, p0: int, lead: tuple[int, int], q0: int, kr: int, kc: int) -> None:
    """Fold the tile ``x`` (its first cell ``lead`` cells into pixel ``(p0, q0)``) into the pixels; ``x``
    is this pass's own and is overwritten. ``hidden``: count its −∞ cells (the mask may hide some)."""
    peaks = block_max(x, kr, kc, lead)
    h, w = peaks.shape
    span = top[p0 : p0 + h, q0 : q0 + w]
    torch.maximum(span, peaks, out=span)
    neg = torch.isneginf(x) if hidden is not None else None
    if neg is not None and bool(neg.any()):
        hidden[p0 : p0 + h, q0 : q0 + w] += _block_sum(neg, kr, kc, lead)
        if low is not None:
            x.masked_fill_(neg, INF)  # a masked cell is no large magnitude
    if low is not None:
        lows = block_max(x.neg_(), kr, kc, lead).neg_()
        span = low[p0 : p0 + h, q0 : q0 + w]
        torch.minimum(span, lows, out=span)


def _fold_fill(top, low, hidden, p0: int, lead_r: int, rows: int, kr: int, keys: tuple[int, int, int, int],
               kc: int, fill: float) -> None:  # fmt: skip
    """Rows ``rows`` (from ``lead_r`` rows into pixel row ``p0``) of the keys ``c0:c1`` outside ``v0:v1``,
    every one ``fill`` (−∞: masked; 0: a weight after the mask), folded without computing them."""
    c0, c1, v0, v1 = keys
    width = top.shape[1]
    counts = _fill_columns(c0, c1, v0, v1, kc, width, top.device)  # (W,)
    per_row = _block_sum(top.new_ones((rows, 1)), kr, 1, (lead_r, 0))[:, 0]  # (h,) rows in each pixel row
    h = per_row.shape[0]
    seen = counts > 0
    if hidden is not None:
        hidden[p0 : p0 + h] += per_row[:, None] * counts[None, :]
    else:  # 0 (a weight after the mask): the pixels holding such keys hold it too
        span = top[p0 : p0 + h]
        span[:, seen] = torch.maximum(span[:, seen], span.new_tensor(fill))
        if low is not None:
            span = low[p0 : p0 + h]
            span[:, seen] = torch.minimum(span[:, seen], span.new_tensor(fill))
