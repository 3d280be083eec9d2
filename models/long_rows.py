"""Long inputs: keep Q, K, V and each row's softmax statistics, never the map (issue 34).

At 131,072 tokens one head's float32 map is 64 GiB. What is kept instead, per head and query row,
is ``m_i`` and ``l_i = log Σ_j exp((masked_ij − m_i) / T)`` (with a learned sink's logit in the sum;
``m_i`` the row's largest masked score, or 0 when T = 1: then ``l_i`` is the row's log-sum-exp, from
torch's fused kernel). Then any weight is

    a_ij = exp((masked_ij − m_i) / T − l_i)

exactly (float32, as the softmax itself: the same steps up to ``masked``, those of the one
attention function, :func:`models.attend.after_scores`), for a tile, a row, a hovered cell, the
inspector and ``explain``, at any zoom, computed from Q and K alone.

The statistics of a row need its whole row of scores. The overview of a head (the peak of each
pixel's block of cells, as :mod:`models.reduce`) goes over every row anyway: it computes them on
the way, in row blocks, top to bottom, reporting each band of pixel rows as it is done. Rows asked
for before the overview has reached them (a zoomed tile) get theirs computed at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import torch

from .config import Cancelled

CHUNK_CELLS = 1 << 21  # cells of one block of scores in a streamed pass (8 MiB of float32)
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
    """Row statistics of one :class:`~models.pairs.PairStore` and the reads built on them."""

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
            step = self.chunk_rows()
            for s in range(a, b, step):
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
        rows = self.chunk_rows()
        whole = (c0, c1) == (0, store.n_k)
        t = store.spec.temperature
        for s in range(r0, r1, rows):
            if should_stop is not None and should_stop():
                raise Cancelled("weights")
            e = min(r1, s + rows)
            with torch.no_grad():
                if whole:
                    x, v0, v1 = self._masked(head, s, e)
                    with self._lock:
                        fresh = not bool(self.known[head, s:e].all())
                    if fresh:
                        self._learn(head, s, e, x)
                    m, lse = self.stats(head, s, e)
                else:
                    m, lse = self.stats(head, s, e)
                    v0, v1 = store.spec.mask.visible_columns(s, e, store.n_keys)
                    a, b = max(c0, v0), min(c1, v1)
                    x = store._chain("masked", head, s, e, a, b).to("cpu", torch.float32) if b > a else None
                    if x is not None:
                        x = torch.cat([x[:, : b - a], x[:, -1:]], dim=1) if store.n_k > store.n_keys else x
                    v0, v1 = a, b
                band = self._band(x, m, lse, t, v0, v1, c0, c1, kr, kc, s - r0, width)
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
        rows = m.shape[0]
        out = torch.full((rows, width), float("-inf"))
        if x is not None and v1 > v0:
            keys = x[:, : v1 - v0]
            lead = (v0 - c0) % kc  # column blocks start at c0 + k·kc
            first = (v0 - c0) // kc
            if lead:  # the first, partial block
                n = min(kc - lead, v1 - v0)
                out[:, first] = keys[:, :n].amax(dim=1)
                keys, first = keys[:, n:], first + 1
            whole = keys.shape[1] // kc * kc
            if whole:
                out[:, first : first + whole // kc] = keys[:, :whole].reshape(rows, whole // kc, kc).amax(dim=2)
            if keys.shape[1] > whole:  # the last, partial block
                out[:, first + whole // kc] = keys[:, whole:].amax(dim=1)
        if x is not None and store.n_k > store.n_keys and c1 > store.n_keys:  # the sink's column
            col = (store.n_keys - c0) // kc
            out[:, col] = torch.maximum(out[:, col], x[:, -1])
        out = _log_weights(out, m, lse, t)  # (r, W): each block's largest log weight
        lead = offset % kr  # rows to pixel rows (a pixel row may span two blocks of rows)
        height = -(-(lead + rows) // kr)
        padded = torch.full((height * kr, width), float("-inf"))
        padded[lead : lead + rows] = out
        return torch.exp(padded.view(height, kr, width).amax(dim=1)).numpy()
