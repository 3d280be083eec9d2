"""Long inputs: keep Q, K, V and each row's softmax statistics, never the map (issue 34).

At 131,072 tokens one head's float32 map is 64 GiB. What is kept instead, per head and query row,
is ``m_i`` and ``l_i = log Σ_j exp((masked_ij − m_i) / T)`` (with a learned sink's logit in the sum;
``m_i`` the row's largest masked score, or 0 when T = 1: then ``l_i`` is the row's log-sum-exp, from
torch's fused kernel). Then any weight is

    a_ij = exp((masked_ij − m_i) / T − l_i)

exactly (float32, as the softmax itself: the same steps up to ``masked``, those of the one
attention function, :func:`models.engine.attend.after_scores`), for a tile, a row, a hovered cell, the
inspector and ``explain``, at any zoom, computed from Q and K alone.

The statistics of a row need its whole row of scores. The overview of a head (the peak of each
pixel's block of cells, as :mod:`models.engine.reduce`) goes over every row anyway: it computes them on
the way, in row blocks, top to bottom, reporting each band of pixel rows as it is done. Rows asked
for before the overview has reached them (a zoomed tile) get theirs computed at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from models.config import Cancelled

CHUNK_CELLS = 1 << 21  # cells of one block of scores in a streamed pass (8 MiB of float32)
# Past TILE_KEYS keys a row, the overview goes over blocks of TILE_ROWS rows × TILE_KEYS keys (the
# log-sum-exp combined over them): 16 rows × 131,072 keys read all of K for every 16 rows.
TILE_KEYS, TILE_ROWS = 16384, 128
OnRows = Callable[[int, np.ndarray], None] | None  # (pixel rows done, the peaks so far)


def _log_weights(x: torch.Tensor, m: torch.Tensor, lse: torch.Tensor, temperature: float) -> torch.Tensor:
    """``(masked − m) / T − l`` for ``x (r, c)`` and the rows' ``m, l (r,)``: each weight's log (−∞
    where hidden; a row with every key hidden: −∞ everywhere, its weights 0)."""
    z = x - torch.where(torch.isneginf(m), torch.zeros_like(m), m)[:, None]
    if temperature != 1.0:
        z = torch.where(z == 0, z, z / temperature)  # as the softmax: 0 / T stays 0
    z = z - lse[:, None]
    return torch.nan_to_num_(z, nan=float("-inf"))  # a dead row: −∞ − (−∞)


class LongRows:
    """Row statistics of one :class:`~models.engine.pairs.PairStore` and the reads built on them."""

    def __init__(self, store) -> None:
        self.store = store
        h, n = store.heads, store.n_q
        self.m = torch.full((h, n), float("nan"))  # each row's largest masked score
        self.lse = torch.full((h, n), float("nan"))  # log Σ exp((masked − m) / T)
        self.known = torch.zeros((h, n), dtype=torch.bool)
        self._lock = threading.Lock()

    def chunk_rows(self) -> int:
        return max(8, CHUNK_CELLS // max(1, self.store.n_k) // 8 * 8)

    # --- the statistics -------------------------------------------------------------------------
    def _masked(self, head: int, r0: int, r1: int) -> tuple[torch.Tensor, int, int]:
        """``(x, c0, c1)``: the masked scores of rows ``r0:r1`` over the keys ``c0:c1`` some of them
        see (then a sink's column): the rest of each row is −∞ by definition."""
        store = self.store
        c0, c1 = store.spec.mask.visible_columns(r0, r1, store.n_keys)
        x = store._chain("masked", head, r0, r1, c0, c1)  # (r, c [+ 1])
        return x.to("cpu", torch.float32), c0, c1

    def _learn(self, head: int, r0: int, r1: int, x: torch.Tensor) -> None:
        t = self.store.spec.temperature
        if t == 1.0:  # torch's fused log-sum-exp (one pass, no temporary): m = 0, l = lse
            lse = torch.logsumexp(x, dim=-1)  # (r,): −∞ for a dead row
            m = torch.zeros_like(lse)
        else:  # as the softmax: the row maximum subtracted before dividing by T
            m = x.amax(dim=-1)  # (r,)
            z = x - torch.where(torch.isneginf(m), torch.zeros_like(m), m)[:, None]  # ≤ 0
            z = torch.where(z == 0, z, z / t)
            lse = torch.log(z.exp_().sum(dim=-1))  # (r,): −∞ for a dead row
        with self._lock:
            self.m[head, r0:r1], self.lse[head, r0:r1] = m, lse
            self.known[head, r0:r1] = True

    def stats(self, head: int, r0: int, r1: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(m, l)`` of rows ``r0:r1``, computing the rows not known yet."""
        with self._lock:
            missing = (~self.known[head, r0:r1]).nonzero().flatten()
        if missing.numel():
            a, b = r0 + int(missing[0]), r0 + int(missing[-1]) + 1
            tiled = self.store.spec.temperature == 1.0 and self.store.n_keys > TILE_KEYS
            step = TILE_ROWS if tiled else self.chunk_rows()
            for s in range(a, b, step):
                if tiled:  # a zoomed tile's rows at 131,072 keys: 16 rows at a time read all of K each time
                    self._tiled_band(head, s, min(b, s + step), 0, 1, 1, 0, 0)
                    continue
                x, _, _ = self._masked(head, s, min(b, s + step))
                self._learn(head, s, min(b, s + step), x)
        with self._lock:
            return self.m[head, r0:r1].clone(), self.lse[head, r0:r1].clone()

    # --- exact reads ----------------------------------------------------------------------------
    def weights(self, head: int, r0: int, r1: int, c0: int, c1: int) -> torch.Tensor:
        """Weights of rows ``r0:r1``, columns ``c0:c1`` (a sink's column is the last, ``n_keys``),
        ``(r, c)`` float32: ``exp((masked − m) / T − l)``; keys no row sees are exactly 0."""
        store = self.store
        m, lse = self.stats(head, r0, r1)
        out = torch.zeros((r1 - r0, c1 - c0), dtype=torch.float32)
        v0, v1 = store.spec.mask.visible_columns(r0, r1, store.n_keys)
        a, b = max(c0, v0), min(c1, v1)  # the visible keys asked for
        t = store.spec.temperature
        if b > a:
            x = store._chain("masked", head, r0, r1, a, b).to("cpu", torch.float32)[:, : b - a]
            out[:, a - c0 : b - c0] = torch.exp(_log_weights(x, m, lse, t))
        if store.n_k > store.n_keys and c1 > store.n_keys:  # the sink's column
            sink = store.spec.sinks[head].to(torch.float32).expand(r1 - r0, 1)
            out[:, store.n_keys - c0 :] = torch.exp(_log_weights(sink, m, lse, t))
        return out

    def column(self, head: int, col: int) -> np.ndarray:
        """Each row's weight on key ``col`` (``n_keys``: a learned sink's column), ``(n_q,)`` float32:
        exact from the rows' statistics where they are known, NaN where not yet (none is computed here:
        the overview learns them on the way). Key 0's column is the "sink share" (issue 34)."""
        store = self.store
        with self._lock:
            known, m, lse = self.known[head].clone(), self.m[head].clone(), self.lse[head].clone()
        out = torch.full((store.n_q,), float("nan"))
        if bool(known.any()):
            with torch.no_grad():
                if col >= store.n_keys:  # the sink's logit, the same for every row
                    x = store.spec.sinks[head].to(torch.float32).expand(store.n_q, 1)
                else:
                    x = store._chain("masked", head, 0, store.n_q, col, col + 1).to("cpu", torch.float32)[:, :1]
                w = torch.exp(_log_weights(x, m, lse, store.spec.temperature))[:, 0]
            out[known] = w[known]
        return out.numpy()

    # --- the overview ---------------------------------------------------------------------------
    def overview(self, head: int, region: tuple[int, int, int, int], step: tuple[int, int],
                 should_stop=None, on_rows: OnRows = None) -> np.ndarray:  # fmt: skip
        """The weights of ``region`` (rows r0:r1, cols c0:c1) reduced to pixels of ``step`` cells,
        each its block's largest weight, row block by row block, top to bottom; the rows' statistics
        are learned on the way (whole rows are computed where the region holds whole rows)."""
        store = self.store
        r0, r1, c0, c1 = region
        kr, kc = step
        height, width = -(-(r1 - r0) // kr), -(-(c1 - c0) // kc)
        peak = np.zeros((height, width), dtype=np.float32)
        whole = (c0, c1) == (0, store.n_k)
        t = store.spec.temperature
        tiled = whole and t == 1.0 and store.n_keys > TILE_KEYS
        rows = TILE_ROWS if tiled else self.chunk_rows()
        for s in range(r0, r1, rows):
            if should_stop is not None and should_stop():
                raise Cancelled("weights")
            e = min(r1, s + rows)
            with torch.no_grad():
                if tiled:
                    band = self._tiled_band(head, s, e, c0, kr, kc, s - r0, width)
                elif whole:
                    x, v0, v1 = self._masked(head, s, e)
                    with self._lock:
                        fresh = not bool(self.known[head, s:e].all())
                    if fresh:
                        self._learn(head, s, e, x)
                    m, lse = self.stats(head, s, e)
                    band = self._band(x, m, lse, t, v0, v1, c0, c1, kr, kc, s - r0, width)
                else:
                    m, lse = self.stats(head, s, e)
                    v0, v1 = store.spec.mask.visible_columns(s, e, store.n_keys)
                    a, b = max(c0, v0), min(c1, v1)
                    x = store._chain("masked", head, s, e, a, b).to("cpu", torch.float32) if b > a else None
                    if x is not None:
                        x = torch.cat([x[:, : b - a], x[:, -1:]], dim=1) if store.n_k > store.n_keys else x
                    band = self._band(x, m, lse, t, a, b, c0, c1, kr, kc, s - r0, width)
            p0 = (s - r0) // kr
            np.maximum(peak[p0 : p0 + band.shape[0]], band, out=peak[p0 : p0 + band.shape[0]])
            if on_rows is not None:
                on_rows(height if e == r1 else (e - r0) // kr, peak)  # whole pixel rows done
        return peak

    def _band(self, x, m, lse, t, v0, v1, c0, c1, kr, kc, offset, width) -> np.ndarray:
        """One block of rows as pixel rows: the column blocks' largest score, made a log weight
        (monotone in the score, row by row), then the row blocks' largest, then exp (monotone too:
        exp of the largest is the largest weight). No pass over the cells but the block maximum."""
        store = self.store
        out = torch.full((m.shape[0], width), float("-inf"))
        if x is not None and v1 > v0:
            _column_peaks(out, x[:, : v1 - v0], v0 - c0, kc)
        if x is not None and store.n_k > store.n_keys and c1 > store.n_keys:  # the sink's column
            col = (store.n_keys - c0) // kc
            out[:, col] = torch.maximum(out[:, col], x[:, -1])
        return _pixel_rows(_log_weights(out, m, lse, t), offset, kr)

    def _tiled_band(self, head: int, s: int, e: int, c0: int, kr: int, kc: int, offset: int, width: int):
        """:meth:`_band` of whole rows (T = 1) over tiles of keys: each tile's log-sum-exp combined
        (``logaddexp``) into the rows' statistics, its column peaks into the pixels (``width`` 0:
        the statistics alone)."""
        store = self.store
        v0, v1 = store.spec.mask.visible_columns(s, e, store.n_keys)
        out = torch.full((e - s, width), float("-inf"))
        lse = torch.full((e - s,), float("-inf"))
        x = None
        for a in range(v0, v1, TILE_KEYS):
            b = min(v1, a + TILE_KEYS)
            x = store._chain("masked", head, s, e, a, b).to("cpu", torch.float32)  # (r, b − a [+ a sink])
            lse = torch.logaddexp(lse, torch.logsumexp(x[:, : b - a], dim=-1))
            if width:
                _column_peaks(out, x[:, : b - a], a - c0, kc)
        if store.n_k > store.n_keys:  # the sink's logit: once in the sum, in its own column
            sink = store.spec.sinks[head].to(torch.float32).expand(e - s)
            lse = torch.logaddexp(lse, sink)
            if width:
                col = (store.n_keys - c0) // kc
                out[:, col] = torch.maximum(out[:, col], sink)
        m = torch.zeros_like(lse)
        with self._lock:
            self.m[head, s:e], self.lse[head, s:e] = m, lse
            self.known[head, s:e] = True
        return _pixel_rows(_log_weights(out, m, lse, 1.0), offset, kr) if width else None


def _column_peaks(out: torch.Tensor, keys: torch.Tensor, at: int, kc: int) -> None:
    """Fold ``keys (r, c)``, the columns ``at : at + c`` of the region, into ``out (r, W)``: each
    pixel column the largest of its ``kc`` columns (partial blocks at either end kept as maxima)."""
    rows, n = keys.shape
    first, lead = at // kc, at % kc
    if lead:  # the first, partial block
        k = min(kc - lead, n)
        out[:, first] = torch.maximum(out[:, first], keys[:, :k].amax(dim=1))
        keys, first, n = keys[:, k:], first + 1, n - k
    whole = n // kc * kc
    if whole:
        span = out[:, first : first + whole // kc]
        torch.maximum(span, _block_max(keys[:, :whole], kc), out=span)
    if n > whole:  # the last, partial block
        col = first + whole // kc
        out[:, col] = torch.maximum(out[:, col], keys[:, whole:].amax(dim=1))


def _block_max(keys: torch.Tensor, kc: int) -> torch.Tensor:
    """``keys (r, W·kc)`` → ``(r, W)``, the largest of each ``kc`` columns: torch's reduction over a
    short last axis is slow (10 ms for 2 Mi cells at kc = 16; max_pool1d 3.7 ms, amax at kc = 128 0.2 ms)."""
    rows, n = keys.shape
    if kc < 64:
        return F.max_pool1d(keys[None], kc, kc)[0]
    return keys.reshape(rows, n // kc, kc).amax(dim=2)


def _pixel_rows(z: torch.Tensor, offset: int, kr: int) -> np.ndarray:
    """Rows of log weights ``z (r, W)``, the first at ``offset`` rows into the region, as pixel rows
    (a pixel row may span two blocks of rows: partial ones are maxima too), exp'd."""
    rows, width = z.shape
    lead = offset % kr
    height = -(-(lead + rows) // kr)
    padded = torch.full((height * kr, width), float("-inf"))
    padded[lead : lead + rows] = z
    return torch.exp(padded.view(height, kr, width).amax(dim=1)).numpy()
