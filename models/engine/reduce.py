"""Reduce a matrix to the pixels it is drawn on without losing a peak.

Each block of ``k_r × k_c`` cells becomes one pixel holding the value that matters: the largest
for weights (a previous-token head at 16,384 tokens still shows its diagonal), the one of largest
magnitude for signed stages. Masked (−∞) cells are counted, so that a block mixing masked and
visible cells can be drawn unlike either alone; a NaN anywhere in a block makes the block NaN.
Rows are read a band at a time from the stage (lazily computed stages included), so memory stays
at one band whatever the size. A lazy stage's bands are reduced in torch on the trace's device, and
only the pixels cross to the host, once per head (issue 45). The block maximum is the one of
models.engine.pixels (:func:`~models.engine.pixels.block_max`, for numpy arrays and tensors alike),
with the enlargement of peaks smaller than a pixel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from models.engine.host import to_numpy
from models.engine.long_stages import reduce_tiles
from models.engine.pixels import block_max, block_step
from models.engine.trace import Stage

BAND_CELLS = 1 << 23  # cells read per band (32 MiB of float32)


@dataclass(frozen=True, eq=False)
class Reduced:
    """One head's matrix (or a region of it) at display resolution."""

    peak: np.ndarray  # (H, W) float32: the block's max (sequential) or largest-magnitude value (signed)
    masked: np.ndarray | None  # (H, W) float32 fraction of −∞ cells per block, None when there are none
    region: tuple[int, int, int, int]  # rows r0:r1, cols c0:c1 of the full matrix
    step: tuple[int, int]  # cells per pixel, rows and columns
    finite_range: tuple[float, float]  # exact min and max of the finite values read (nan, nan: none)


def _sides(max_side: int | tuple[int, int]) -> tuple[int, int]:
    return (max_side, max_side) if isinstance(max_side, int) else (int(max_side[0]), int(max_side[1]))


def _region_and_step(stage: Stage, max_side: int | tuple[int, int], region: tuple[int, int, int, int] | None):
    """``(r0, r1, c0, c1), (kr, kc)``: the region (by default the whole matrix) and its cells per pixel."""
    shape = stage.shape[-2:]
    r0, r1, c0, c1 = region if region is not None else (0, shape[0], 0, shape[1])
    rows_px, cols_px = _sides(max_side)
    return (r0, r1, c0, c1), (block_step(r1 - r0, rows_px), block_step(c1 - c0, cols_px))


def _cells(stage: Stage, head: int, region: tuple[int, int, int, int]) -> np.ndarray:
    """Head ``head``'s cells in ``region``, read whole."""
    r0, r1, c0, c1 = region
    store = stage.store
    return stage.rows(head, r0, r1)[:, c0:c1] if store is None else store.region(stage.name, head, r0, r1, c0, c1)


def _finite_extremes(x: torch.Tensor, largest: bool) -> torch.Tensor:
    """The largest (or smallest) finite value of each ``x[b]``, ∓inf where there is none, ``(B,)`` float64 on
    ``x``'s device: by ``where``, not boolean indexing (which gathers, ~20× slower on a band's pixels)."""
    bound = float("-inf") if largest else float("inf")
    if x[0].numel() == 0:
        return torch.full((x.shape[0],), bound, dtype=torch.float64, device=x.device)
    kept = torch.where(torch.isfinite(x), x, bound).flatten(1)
    return (kept.amax(dim=1) if largest else kept.amin(dim=1)).double()


def _band_peaks(t: torch.Tensor, kr: int, kc: int, signed: bool, want_low: bool, top: torch.Tensor | None = None):
    """The blocks of a band of ``B`` heads, ``t (B, 1, r, c)``: ``(peaks, masked share or None, highest finite
    value (B,), lowest (B,) or None)``, each pixel its block's max (sequential) or the value of largest
    magnitude (signed, masked cells not counted). ``top``: the block maxima, made already."""
    # Weights (the unsigned stage) are never −∞: a masked key's weight is 0; skip that pass.
    neg_inf = torch.isneginf(t) if signed else None
    has_masked = neg_inf is not None and bool(neg_inf.any())
    if top is None:
        top = block_max(t, kr, kc)  # block max (−∞: all masked; NaN spreads)
    hi, lo = _finite_extremes(top, largest=True), None
    if want_low:
        # block min of the visible cells: masked cells must not count as a large magnitude
        low = -block_max(-(t.masked_fill(neg_inf, float("inf")) if has_masked else t), kr, kc)
        lo = _finite_extremes(low, largest=False)
    if signed:
        top = torch.where(torch.isneginf(top), top, torch.where(low.abs() > top.abs(), low, top))
    share = None
    if has_masked:
        share = F.avg_pool2d(neg_inf.float(), (kr, kc), ceil_mode=True, count_include_pad=False)
    return top, share, hi, lo


READ_ROWS = 256  # rows of a stage without a store read at once: a long input's 'concat' computes each from n keys


def _read_rows(stage: Stage, head: int, start: int, end: int, should_stop=None) -> np.ndarray:
    """Rows ``start:end`` of a stage without a store, :data:`READ_ROWS` at a time, a newer request heard
    between them: a band of 16,384 rows of a long input's 'concat' took minutes, and a window closed
    meanwhile left its worker computing when the process ended (issue 50, point 1)."""
    if end - start <= READ_ROWS:
        return stage.rows(head, start, end)
    parts = []
    for a in range(start, end, READ_ROWS):
        _stop_if_asked(should_stop, stage)
        parts.append(stage.rows(head, a, min(end, a + READ_ROWS)))
    return np.concatenate(parts)


def _bands(stage: Stage, head: int, r0: int, r1: int, band_rows: int, kr: int, visible: bool = False,
           should_stop=None):  # fmt: skip
    """``(first row, rows)`` bands of one head, tensors (a lazy stage's on the trace's device): a lazy
    stage's own blocks when they line up with the reduction (no copy), else copies of ``band_rows`` rows.
    ``visible``: a lazy stage's blocks may end at the last key their queries see (keys 0:w of the row;
    the rest are 0)."""
    store = stage.store
    if store is not None and store.block_rows % kr == 0 and r0 % store.block_rows == 0:
        for b in range(r0 // store.block_rows, -(-r1 // store.block_rows)):
            start = b * store.block_rows
            # a stage larger than the cache's budget: a pass over it keeps none of it (it would only
            # push out what hover and the focus panel read, and hold the budget's memory)
            block = store.visible_tensor(stage.name, head, b)[0] if visible else \
                store.block_tensor(stage.name, head, b, keep=store.fits)  # fmt: skip
            yield start, block[: min(r1, start + block.shape[0]) - start]
        return
    for start in range(r0, r1, band_rows):  # a stage larger than the cache's budget: none of it kept
        end = min(r1, start + band_rows)
        yield start, (torch.from_numpy(_read_rows(stage, head, start, end, should_stop)) if store is None else
                      store.rows_tensor(stage.name, head, start, end, keep=store.fits))  # fmt: skip


def _exact(values: np.ndarray, region: tuple[int, int, int, int]) -> Reduced:
    finite = np.isfinite(values)
    if finite.all():
        lo, hi = (float(values.min()), float(values.max())) if values.size else (np.nan, np.nan)
        return Reduced(values.astype(np.float32, copy=True), None, region, (1, 1), (lo, hi))
    shown = values[finite]
    lo, hi = (float(shown.min()), float(shown.max())) if shown.size else (np.nan, np.nan)
    masked = np.isneginf(values)
    return Reduced(values.astype(np.float32, copy=True), masked.astype(np.float32) if masked.any() else None,
                   region, (1, 1), (lo, hi))  # fmt: skip


def _seen_width(stage: Stage, r0: int, rows: int, c0: int, c1: int, kc: int) -> int:
    """Columns (from ``c0``, a multiple of ``kc``) holding every key some of these query rows can
    see: beyond them a lazy weights stage is exactly 0 (causal). Else the whole width."""
    store = stage.store
    if store is None or stage.name != "weights" or c0 != 0:
        return c1 - c0
    _, visible_end = store.spec.mask.visible_columns(r0, r0 + rows, store.n_k)
    return min(c1, -(-visible_end // kc) * kc) - c0


def _stop_if_asked(should_stop, stage: Stage) -> None:
    """Raise Cancelled when a newer request has come (``should_stop()``)."""
    if should_stop is not None and should_stop():
        from models.config import Cancelled

        raise Cancelled(stage.name)


def reduce_head(
    stage: Stage,
    head: int,
    max_side: int | tuple[int, int] = 1024,
    region: tuple[int, int, int, int] | None = None,
    signed: bool = True,
    should_stop=None,
    on_rows=None,
) -> Reduced:
    """``stage``'s head ``head`` (rows r0:r1 × cols c0:c1 of it) reduced to at most ``max_side``
    pixels a side (or (rows, cols) pixels: the device pixels a view draws it on), by blocks of whole cells.
    A long store's weights (models.engine.long_rows) stream: ``on_rows(pixel rows done, peaks so far)``."""
    _stop_if_asked(should_stop, stage)  # before each head: a small one is read whole below
    shape = stage.shape[-2:]
    (r0, r1, c0, c1), (kr, kc) = _region_and_step(stage, max_side, region)
    out_rows = -(-(r1 - r0) // kr)
    store = stage.store
    if kr == kc == 1:  # a pixel per cell: nothing to reduce (small matrices, zoomed regions)
        return _exact(_cells(stage, head, (r0, r1, c0, c1)), (r0, r1, c0, c1))
    if stage.streamed:  # from Q, K and the rows' stats
        peak = store.long.overview(head, (r0, r1, c0, c1), (kr, kc), should_stop, on_rows)
        top = float(peak.max()) if peak.size else float("nan")
        return Reduced(peak, None, (r0, r1, c0, c1), (kr, kc), (float("nan"), top))
    if store is not None and store.long is not None and stage.name in store.names:  # as the weights: by tiles
        return _from_tiles(stage, head, (r0, r1, c0, c1), (kr, kc), signed, should_stop)
    if kr * (c1 - c0) > BAND_CELLS:  # a pixel row taller than a band (a strip of 1 × 246 px): folded
        return _tall(stage, head, (r0, r1, c0, c1), (kr, kc), signed, should_stop)
    band_rows = max(kr, (BAND_CELLS // max(1, c1 - c0)) // kr * kr)
    peaks, masks, lows, highs = [], [], [], []
    # The exact minimum costs a second pass: for weights (whose peaks are maxima) only when small.
    want_low = signed or (r1 - r0) * (c1 - c0) <= 1 << 22
    # Weights past the last key a block's queries see are exactly 0 (causal): whole rows of a
    # lazy stage are read only up to there (a window's blocks start later: whole rows then).
    mask = stage.store.spec.mask if stage.store is not None else None
    visible = (stage.name == "weights" and not want_low and (c0, c1) == (0, shape[1]) and mask is not None
               and mask.window is None)  # fmt: skip
    for start, band in _bands(stage, head, r0, r1, band_rows, kr, visible, should_stop):
        _stop_if_asked(should_stop, stage)
        t = band[None, None, :, c0:c1]  # (1, 1, r, c), a view
        if (c0 or c1 != band.shape[1]) and not visible:
            t = t.contiguous()
        with torch.no_grad():
            width = _seen_width(stage, start, band.shape[0], c0, c1, kc) if not want_low else c1 - c0
            top = None
            if visible and band.shape[1] < c1:  # keys 0:w only; the pixels past them are 0
                top = t.new_zeros((1, 1, -(-band.shape[0] // kr), -(-c1 // kc)))
                top[..., : -(-band.shape[1] // kc)] = block_max(t, kr, kc)
            elif width < c1 - c0:
                # Weights of keys no query of the band sees are exactly 0: their pixels are 0 too.
                top = t.new_zeros((1, 1, -(-band.shape[0] // kr), -(-(c1 - c0) // kc)))
                top[..., : width // kc] = block_max(t[..., :width], kr, kc)  # a strided view: no copy
            top, share, band_hi, band_lo = _band_peaks(t, kr, kc, signed, want_low, top)
            highs.append(band_hi)
            lows.append(band_lo)
            peaks.append(top[0, 0])  # kept where they are: the pixels cross to the host once, below
            masks.append(share)
    peak = to_numpy(torch.cat(peaks)) if peaks else np.zeros((0, 0), np.float32)
    masked = None
    if any(m is not None for m in masks):
        masked = to_numpy(torch.cat([m[0, 0] if m is not None else p.new_zeros(p.shape) for m, p in zip(masks, peaks)]))
    assert peak.shape[0] == out_rows, (peak.shape, out_rows)
    hi = float(torch.cat(highs).max()) if highs else -np.inf
    lo = float(torch.cat(lows).min()) if want_low and lows else np.inf
    if not want_low:  # a large weights matrix: its maximum only (the minimum was not read)
        top = hi if np.isfinite(hi) else float("nan")
        return Reduced(peak.astype(np.float32, copy=False), masked, (r0, r1, c0, c1), (kr, kc), (float("nan"), top))
    finite_range = (lo, hi) if lo <= hi else (float("nan"), float("nan"))
    return Reduced(peak.astype(np.float32, copy=False), masked, (r0, r1, c0, c1), (kr, kc), finite_range)


def _from_tiles(stage: Stage, head: int, region: tuple[int, int, int, int], step: tuple[int, int], signed: bool,
                should_stop=None) -> Reduced:  # fmt: skip
    """:func:`reduce_head` of a long store's stage other than its weights (models.engine.long_stages):
    the same pixels, the same range, from tiles of Q and K."""
    (r0, r1, c0, c1), (kr, kc) = region, step
    want_low = signed or (r1 - r0) * (c1 - c0) <= 1 << 22  # as reduce_head
    # weights and their like are never −∞ (0 where hidden): no masked share for an unsigned stage
    top, low, hidden = reduce_tiles(stage.store, stage.name, head, region, step, want_low, signed, should_stop)
    hi = float(_finite_extremes(top[None], largest=True)[0])
    lo = float(_finite_extremes(low[None], largest=False)[0]) if want_low else float("nan")
    peak = top
    if signed:
        peak = torch.where(torch.isneginf(top), top, torch.where(low.abs() > top.abs(), low, top))
    masked = None
    if hidden is not None and bool(hidden.any()):
        rows = torch.full((top.shape[0],), float(kr), dtype=torch.float64, device=top.device)
        rows[-1] = (r1 - r0) - (top.shape[0] - 1) * kr
        cols = torch.full((top.shape[1],), float(kc), dtype=torch.float64, device=top.device)
        cols[-1] = (c1 - c0) - (top.shape[1] - 1) * kc
        masked = to_numpy(hidden / (rows[:, None] * cols[None, :]), torch.float32)
    if not want_low:  # a large matrix of an unsigned stage: its maximum only
        finite_range = (float("nan"), hi if np.isfinite(hi) else float("nan"))
    else:
        finite_range = (lo, hi) if lo <= hi else (float("nan"), float("nan"))
    return Reduced(to_numpy(peak).astype(np.float32, copy=False), masked, region, step, finite_range)


def _columns(x: torch.Tensor, kc: int, width: int, fill: float) -> torch.Tensor:
    """``x (c,)`` as ``(width, kc)``: pixel columns of ``kc`` columns, the last one padded with ``fill``."""
    pad = width * kc - x.shape[0]
    return (torch.cat([x, x.new_full((pad,), fill)]) if pad else x).view(width, kc)


def _seen_bands(stage: Stage, head: int, r0: int, r1: int, band_rows: int, should_stop=None):
    """``(first row, rows, first column they hold)``: a lazy stage's blocks of the keys some query of them
    sees (from the mask on: the other columns are −∞, masked, or exactly 0 after it), else whole rows."""
    store = stage.store
    if store is not None and r0 % store.block_rows == 0 and stage.name in ("masked", "weights", "weighted_norms"):
        for b in range(r0 // store.block_rows, -(-r1 // store.block_rows)):
            start = b * store.block_rows
            block, k0 = store.visible_tensor(stage.name, head, b)
            yield start, block[: min(r1, start + block.shape[0]) - start], k0
        return
    for start, band in _bands(stage, head, r0, r1, band_rows, 1, should_stop=should_stop):
        yield start, band, 0


def _tall(stage: Stage, head: int, region: tuple[int, int, int, int], step: tuple[int, int], signed: bool,
          should_stop=None) -> Reduced:  # fmt: skip
    """:func:`reduce_head` when one pixel row spans more rows than a band holds (a stage drawn as a strip
    of 1 × 246 pixels beside the one shown: ``kr = n``): bands of about :data:`BAND_CELLS` cells (a lazy
    stage's own blocks, of the keys their queries see), each cut at the pixel rows' edges and folded into
    them (the block maximum, the lowest visible value, the masked cells counted): never more than a band
    read at once, where one band of ``kr`` rows was the whole (n, n) head."""
    r0, r1, c0, c1 = region
    kr, kc = step
    height, width = -(-(r1 - r0) // kr), -(-(c1 - c0) // kc)
    store = stage.store
    band_rows = max(1, BAND_CELLS // max(1, stage.shape[-1]))
    if store is not None:  # whole blocks of the store: none computed twice
        band_rows = max(store.block_rows, band_rows // store.block_rows * store.block_rows)
    inf = float("inf")
    fill = -inf if stage.name == "masked" else 0.0  # a lazy stage's keys no query of a block sees
    device = store.spec.q.device if store is not None else None
    top = torch.full((height, width), -inf, device=device)
    low = torch.full((height, width), inf, device=device)
    hidden = torch.zeros((height, width), dtype=torch.float64, device=device)  # −∞ cells per pixel
    with torch.no_grad():
        for start, band, k0 in _seen_bands(stage, head, r0, r1, band_rows, should_stop):
            _stop_if_asked(should_stop, stage)
            a0, a1 = max(c0, k0), min(c1, k0 + band.shape[1])  # the region's columns the band holds
            t = band[:, max(0, a0 - k0) : max(0, a1 - k0)]
            a = 0
            while a < t.shape[0]:  # the band's pieces, one per pixel row it crosses
                p = (start + a - r0) // kr
                b = min(t.shape[0], r0 + (p + 1) * kr - start)
                seg = t[a:b]
                highest = t.new_full((c1 - c0,), fill)  # each column's largest value, lowest, −∞ cells
                lowest = t.new_full((c1 - c0,), inf if fill == -inf else fill)
                count = t.new_full((c1 - c0,), float(b - a) if fill == -inf else 0.0, dtype=torch.float64)
                if a1 > a0:
                    highest[a0 - c0 : a1 - c0] = seg.amax(dim=0)
                    neg_inf = torch.isneginf(seg) if signed else None
                    if neg_inf is not None and bool(neg_inf.any()):
                        count[a0 - c0 : a1 - c0] = neg_inf.sum(dim=0).double()
                        seg = torch.where(neg_inf, inf, seg)  # masked cells are no large magnitude
                    else:
                        count[a0 - c0 : a1 - c0] = 0.0
                    lowest[a0 - c0 : a1 - c0] = seg.amin(dim=0)
                torch.maximum(top[p], block_max(highest[None], 1, kc)[0], out=top[p])
                torch.minimum(low[p], -block_max(-lowest[None], 1, kc)[0], out=low[p])
                if signed:
                    hidden[p] += _columns(count, kc, width, 0.0).sum(dim=1)
                a = b
    hi = float(_finite_extremes(top[None], largest=True)[0])
    lo = float(_finite_extremes(low[None], largest=False)[0])
    peak = top
    if signed:
        peak = torch.where(torch.isneginf(top), top, torch.where(low.abs() > top.abs(), low, top))
    masked = None
    if bool(hidden.any()):
        rows = torch.full((height,), float(kr), dtype=torch.float64, device=device)
        rows[-1] = (r1 - r0) - (height - 1) * kr
        cols = torch.full((width,), float(kc), dtype=torch.float64, device=device)
        cols[-1] = (c1 - c0) - (width - 1) * kc
        masked = to_numpy(hidden / (rows[:, None] * cols[None, :]), torch.float32)
    finite_range = (lo, hi) if lo <= hi else (float("nan"), float("nan"))
    if not signed and (r1 - r0) * (c1 - c0) > 1 << 22:  # as reduce_head: a large weights matrix's maximum only
        finite_range = (float("nan"), hi if np.isfinite(hi) else float("nan"))
    return Reduced(to_numpy(peak).astype(np.float32, copy=False), masked, region, step, finite_range)


SMALL_CELLS = 1 << 18  # a stage whose heads hold at most this many cells is reduced in one pass


def reduce_heads(stage: Stage, heads: list[int], max_side: int | tuple[int, int] = 1024,
                 region: tuple[int, int, int, int] | None = None, signed: bool = True,
                 should_stop=None) -> list[Reduced]:  # fmt: skip
    """:func:`reduce_head` of each of ``heads``, the same numbers. A small stage's heads are reduced
    together, in one pass: there each torch call costs more than its cells (4 heads of 61 × 61 onto
    53 px: 0.9 ms one head at a time)."""
    (r0, r1, c0, c1), (kr, kc) = _region_and_step(stage, max_side, region)
    if len(heads) < 2 or (kr, kc) == (1, 1) or stage.streamed or len(heads) * (r1 - r0) * (c1 - c0) > SMALL_CELLS:
        return [reduce_head(stage, h, max_side, region, signed, should_stop) for h in heads]
    _stop_if_asked(should_stop, stage)
    cells = np.stack([_cells(stage, h, (r0, r1, c0, c1)) for h in heads])
    with torch.no_grad():
        top, share, hi, lo = _band_peaks(torch.from_numpy(cells)[:, None], kr, kc, signed, True)
    out = []
    for i in range(len(heads)):
        masked = to_numpy(share[i, 0]) if share is not None and bool(share[i].any()) else None
        finite_range = (float(lo[i]), float(hi[i])) if lo[i] <= hi[i] else (float("nan"), float("nan"))
        out.append(Reduced(to_numpy(top[i, 0]).astype(np.float32, copy=False), masked, (r0, r1, c0, c1), (kr, kc),
                           finite_range))  # fmt: skip
    return out
