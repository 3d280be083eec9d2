"""Long inputs: keep Q, K, V and each row's softmax statistics, never the map (issue 34).

At 131,072 tokens one head's float32 map is 64 GiB. What is kept instead, per head and query row,
is ``m_i``, the row's largest masked score, and ``l_i = log Σ_j exp(temper(masked_ij − m_i))``
(with a learned sink's logit in the sum; ``temper`` is the softmax's division by T, the maximum
first). Then any weight is

    a_ij = exp(temper(masked_ij − m_i) − l_i)

exactly (float32, as the softmax itself: the same steps up to ``masked``, those of the one
attention function, and the statistics by its :func:`models.engine.attend.row_statistics`), for a
tile, a row, a hovered cell, the inspector and ``explain``, at any zoom, computed from Q and K alone.

The statistics of a row need its whole row of scores. The overview of a head (the peak of each
pixel's block of cells, as :mod:`models.engine.reduce`) goes over every row anyway: it computes them on
the way, in blocks of ``TILE_ROWS`` rows × ``TILE_KEYS`` keys (a block of scores that stays in the
cache: one matrix product, then the pixel peaks and the block's statistics read from it, merged
over the row's blocks), top to bottom, reporting each band of pixel rows as it is done. Under a
causal mask a block of rows computes only the keys its rows see (the masked ones are −∞ by
definition), the mask built for the diagonal block alone. Rows asked for before the overview has
reached them (a zoomed tile) get theirs computed at once.

Everything runs in torch on the trace's device (issue 45): the statistics, the blocks of scores, the
pixel peaks (:func:`models.engine.pixels.block_max`, the one peak reduction); what crosses to the host
is each band of finished pixel rows, once (:func:`models.engine.host.to_numpy`), and the cells asked for.
On a GPU a block of keys is :data:`GPU_KEYS` times wider (a kernel per 2 MiB block would leave it idle).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import torch

from models.config import Cancelled
from models.engine.attend import log_weights, merge_statistics, row_statistics
from models.engine.host import to_numpy
from models.engine.pixels import block_max

# One block of scores: TILE_ROWS rows × TILE_KEYS keys, 2 MiB of float32 (it and the softmax's output
# stay in the cache; a block of 128 × 16,384 did not: 1.7 × SDPA at 32,768 tokens). Each block of
# keys of K is read once per TILE_ROWS rows.
TILE_KEYS, TILE_ROWS = 2048, 256
GPU_KEYS = 8  # on CUDA, blocks of TILE_KEYS × GPU_KEYS keys (16 MiB of scores per kernel)
OnRows = Callable[[int, np.ndarray], None] | None  # (pixel rows done, the peaks so far)
NEG_INF = float("-inf")


class LongRows:
    """Row statistics of one :class:`~models.engine.pairs.PairStore` and the reads built on them."""

    def __init__(self, store) -> None:
        self.store = store
        h, n = store.heads, store.n_q
        self.device = store.spec.q.device  # the trace's: every tensor here lives there
        self.m = torch.full((h, n), float("nan"), device=self.device)  # each row's largest masked score
        self.lse = torch.full((h, n), float("nan"), device=self.device)  # log Σ exp(temper(masked − m))
        self.known = torch.zeros((h, n), dtype=torch.bool, device=self.device)
        self._lock = threading.Lock()
        self._buffers = threading.local()

    # --- the statistics -------------------------------------------------------------------------
    def _sink(self, head: int, rows: int) -> torch.Tensor:
        return self.store.spec.sinks[head].to(self.device, torch.float32).expand(rows)  # (rows,): a sink's logit

    def _tile_keys(self) -> int:
        return TILE_KEYS * (GPU_KEYS if self.device.type == "cuda" else 1)

    def _scratch(self, rows: int, keys: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Two float32 buffers of ``rows × keys`` cells, this thread's own (the GUI's hover may ask
        for rows while the worker streams), reused block after block."""
        have = getattr(self._buffers, "cells", None)
        if have is None or have.numel() < 2 * rows * keys:
            have = self._buffers.cells = torch.empty(2 * rows * keys, dtype=torch.float32, device=self.device)
        return have[: rows * keys], have[rows * keys : 2 * rows * keys]

    def _pass(self, head: int, s: int, e: int, kc: int = 1, width: int = 0) -> torch.Tensor | None:
        """Whole rows ``s:e`` over blocks of keys: learns their statistics; with ``width`` returns
        each row's largest masked score in each pixel column of ``kc`` keys, ``(r, width)``."""
        store = self.store
        t = store.spec.temperature
        v0, v1 = store.spec.mask.visible_columns(s, e, store.n_keys)
        out = torch.full((e - s, width), NEG_INF, device=self.device) if width else None
        size = max(1, self._tile_keys() // kc) * kc  # blocks of keys at multiples of whole pixel columns
        ms, ls = [], []
        scores, scratch = self._scratch(e - s, size)
        for a in range(v0 // size * size, v1, size):
            a, b = max(v0, a), min(v1, a + size)
            cells = (e - s) * (b - a)  # the scores in one reused buffer, the softmax's output in another
            x = store.masked(head, s, e, a, b, out=scores[:cells].view(e - s, b - a))
            x = x.to(torch.float32)  # (r, b − a), on the trace's device
            if width:
                _column_peaks(out, x, a, kc)
            m, lse = row_statistics(x, t, scratch[:cells].view(e - s, b - a))  # (r,), (r,)
            ms.append(m)
            ls.append(lse)
        if store.n_k > store.n_keys:  # the sink's logit: a block of one key, in its own column
            sink = self._sink(head, e - s)
            ms.append(sink)
            ls.append(torch.zeros(e - s, device=self.device))
            if width:
                col = store.n_keys // kc
                out[:, col] = torch.maximum(out[:, col], sink)
        if ms:
            m, lse = merge_statistics(torch.stack(ms, dim=-1), torch.stack(ls, dim=-1), t)
        else:  # no key seen by any of these rows
            m = lse = torch.full((e - s,), NEG_INF, device=self.device)
        with self._lock:
            self.m[head, s:e], self.lse[head, s:e] = m, lse
            self.known[head, s:e] = True
        return out

    def stats(self, head: int, r0: int, r1: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(m, l)`` of rows ``r0:r1``, computing the rows not known yet."""
        with self._lock:
            missing = (~self.known[head, r0:r1]).nonzero().flatten()
        if missing.numel():
            a, b = r0 + int(missing[0]), r0 + int(missing[-1]) + 1
            with torch.no_grad():
                for s in range(a, b, TILE_ROWS):
                    self._pass(head, s, min(b, s + TILE_ROWS))
        with self._lock:
            return self.m[head, r0:r1].clone(), self.lse[head, r0:r1].clone()

    # --- exact reads ----------------------------------------------------------------------------
    def weights(self, head: int, r0: int, r1: int, c0: int, c1: int,
                scratch: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """Weights of rows ``r0:r1``, columns ``c0:c1`` (a sink's column is the last, ``n_keys``),
        ``(r, c)`` float32: ``exp(temper(masked − m) − l)``; keys no row sees are exactly 0. ``scratch``: a
        contiguous float32 buffer of at least ``r × c`` cells the scores may be computed in (a streamed pass's)."""
        store = self.store
        m, lse = self.stats(head, r0, r1)
        v0, v1 = store.spec.mask.visible_columns(r0, r1, store.n_keys)
        a, b = max(c0, v0), min(c1, v1)  # the visible keys asked for
        t = store.spec.temperature
        cells = (r1 - r0) * (b - a)
        fits = scratch is not None and scratch.is_contiguous() and scratch.numel() >= cells
        if b > a:
            into = scratch.view(-1)[:cells].view(r1 - r0, b - a) if fits else None
            x = store.masked(head, r0, r1, a, b, out=into)
            if fits and (a, b) == (c0, c1):  # a streamed pass's tile, every key seen: in its buffer, no fresh pages
                return log_weights(x.to(torch.float32), m, lse, t, own=True).exp_()
        out = torch.zeros((r1 - r0, c1 - c0), dtype=torch.float32, device=self.device)
        if b > a:
            out[:, a - c0 : b - c0] = torch.exp(log_weights(x.to(torch.float32), m, lse, t))
        if store.n_k > store.n_keys and c1 > store.n_keys:  # the sink's column
            sink = self._sink(head, r1 - r0)[:, None]
            out[:, store.n_keys - c0 :] = torch.exp(log_weights(sink, m, lse, t))
        return out

    def column(self, head: int, col: int) -> np.ndarray:
        """Each row's weight on key ``col`` (``n_keys``: a learned sink's column), ``(n_q,)`` float32:
        exact from the rows' statistics where they are known, NaN where not yet (none is computed here:
        the overview learns them on the way). Key 0's column is the "sink share" (issue 34)."""
        store = self.store
        with self._lock:
            known, m, lse = self.known[head].clone(), self.m[head].clone(), self.lse[head].clone()
        out = torch.full((store.n_q,), float("nan"), device=self.device)
        if bool(known.any()):
            with torch.no_grad():
                if col >= store.n_keys:  # the sink's logit, the same for every row
                    x = self._sink(head, store.n_q)[:, None]
                else:
                    x = store.masked(head, 0, store.n_q, col, col + 1).to(torch.float32)
                w = torch.exp(log_weights(x, m, lse, store.spec.temperature))[:, 0]
            out[known] = w[known]
        return to_numpy(out)

    # --- the overview ---------------------------------------------------------------------------
    def overview(self, head: int, region: tuple[int, int, int, int], step: tuple[int, int],
                 should_stop=None, on_rows: OnRows = None) -> np.ndarray:  # fmt: skip
        """The weights of ``region`` (rows r0:r1, cols c0:c1) reduced to pixels of ``step`` cells,
        each its block's largest weight, row block by row block, top to bottom; the rows' statistics
        are learned on the way (in the same pass where the region holds whole rows)."""
        store = self.store
        r0, r1, c0, c1 = region
        kr, kc = step
        height, width = -(-(r1 - r0) // kr), -(-(c1 - c0) // kc)
        peak = np.zeros((height, width), dtype=np.float32)
        whole = (c0, c1) == (0, store.n_k)
        t = store.spec.temperature
        for s in range(r0, r1, TILE_ROWS):
            if should_stop is not None and should_stop():
                raise Cancelled("weights")
            e = min(r1, s + TILE_ROWS)
            with torch.no_grad():
                if whole:  # the peaks and the statistics from the same blocks of scores
                    out = self._pass(head, s, e, kc, width)
                    with self._lock:
                        m, lse = self.m[head, s:e], self.lse[head, s:e]
                else:
                    m, lse = self.stats(head, s, e)
                    out = self._region_peaks(head, s, e, c0, c1, kc, width)
                band = _pixel_rows(log_weights(out, m, lse, t), s - r0, kr)
            p0 = (s - r0) // kr
            np.maximum(peak[p0 : p0 + band.shape[0]], band, out=peak[p0 : p0 + band.shape[0]])
            if on_rows is not None:
                on_rows(height if e == r1 else (e - r0) // kr, peak)  # whole pixel rows done
        return peak

    def _region_peaks(self, head: int, s: int, e: int, c0: int, c1: int, kc: int, width: int) -> torch.Tensor:
        """Rows ``s:e`` of a region of keys ``c0:c1``: each row's largest masked score in each pixel
        column, ``(r, width)`` (−∞ where none is seen): made log weights, monotone in the score row by row."""
        store = self.store
        out = torch.full((e - s, width), NEG_INF, device=self.device)
        v0, v1 = store.spec.mask.visible_columns(s, e, store.n_keys)
        a, b = max(c0, v0), min(c1, v1)
        if b > a:
            x = store.masked(head, s, e, a, b).to(torch.float32)
            _column_peaks(out, x, a - c0, kc)
        if store.n_k > store.n_keys and c1 > store.n_keys:  # the sink's column
            col = (store.n_keys - c0) // kc
            out[:, col] = torch.maximum(out[:, col], self._sink(head, e - s))
        return out


def _column_peaks(out: torch.Tensor, keys: torch.Tensor, at: int, kc: int) -> None:
    """Fold ``keys (r, c)``, the columns ``at : at + c`` of the region, into ``out (r, W)``: each
    pixel column the largest of its ``kc`` columns (partial blocks at either end kept as maxima)."""
    peaks = block_max(keys, 1, kc, (0, at % kc))  # (r, w)
    span = out[:, at // kc : at // kc + peaks.shape[1]]
    torch.maximum(span, peaks, out=span)


def _pixel_rows(z: torch.Tensor, offset: int, kr: int) -> np.ndarray:
    """Rows of log weights ``z (r, W)``, the first at ``offset`` rows into the region, as pixel rows
    (a pixel row may span two blocks of rows: partial ones are maxima too), exp'd, on the host: the
    one crossing of a band of the overview."""
    return to_numpy(torch.exp(block_max(z, kr, 1, (offset % kr, 0))))
