"""Stage -> :class:`StageImage`: reduce every head (models.engine.reduce), then colour it (models.engine.colour_index).
The window's pictures and a notebook's are this one function (models.reads.read.read).

When cells are smaller than a pixel, each pixel holds its block's peak and every peak is enlarged
to 3 × 3 pixels (models.engine.reduce.enlarge_peaks): one weight of 1 among a million is still seen."""

from __future__ import annotations

import numpy as np

from models.engine.colour_index import (
    MAX_DISPLAY_SIDE,
    SEQUENTIAL_STAGES,
    StageImage,
    colour_levels,
    resolve_scale,
    to_indices,
)
from models.engine.long_structure import long_structure
from models.engine.pixels import enlarge_peaks
from models.engine.reduce import reduce_heads
from models.engine.trace import Stage


def stage_image(stage: Stage, fit: bool | str = False, region: tuple[int, int, int, int] | None = None,
                max_side: int | tuple[int, int] = MAX_DISPLAY_SIDE, heads: list[int] | None = None,
                should_stop=None, levels: tuple[float, float] | None = None, reduced: list | None = None,
                progress: float = 1.0) -> StageImage:  # fmt: skip
    """Every head of ``stage`` (or ``heads``; ``region`` of each) as colour indices (``fit``: see colour_levels).
    ``reduced``: the heads' reductions already made (a long input's overview, streamed: ``progress``)."""
    sequential = stage.name in SEQUENTIAL_STAGES and not getattr(stage, "difference", False)
    wanted = heads if heads is not None else list(range(stage.heads))
    if reduced is None:
        reduced = reduce_heads(stage, wanted, max_side, region, signed=not sequential, should_stop=should_stop)
    lows = [r.finite_range[0] for r in reduced if np.isfinite(r.finite_range[0])]
    highs = [r.finite_range[1] for r in reduced if np.isfinite(r.finite_range[1])]
    lo = min(lows) if lows and len(lows) == len(reduced) else np.nan  # nan: not read (large weights)
    hi = max(highs) if highs else np.nan
    scale = resolve_scale(fit, stage)
    if levels is not None:  # a zoomed region keeps the colours of the whole matrix
        pass
    elif scale == "log" and sequential:
        positive = [float(r.peak[r.peak > 0].min()) for r in reduced if (r.peak > 0).any()]
        levels = colour_levels(stage, min(positive) if positive else np.nan, hi, "log")
    else:
        levels = colour_levels(stage, lo, hi, scale)
    shape = reduced[0].peak.shape if reduced else (0, 0)
    indices = np.empty((len(reduced), *shape), dtype=np.uint8)
    masked = nans = 0
    for i, r in enumerate(reduced):
        if progress < 1.0 and r.masked is None and not r.peak.any():  # a head not reached yet: all 0
            indices[i], n = to_indices(r.peak[:1, :1], None, levels, log=scale == "log" and sequential)  # broadcast
            continue
        peak = enlarge_peaks(r.peak, signed=not sequential) if r.step != (1, 1) else r.peak
        indices[i], n = to_indices(peak, r.masked, levels, log=scale == "log" and sequential)
        nans += n
        masked += 0 if r.masked is None else int(np.count_nonzero(r.masked))
    return StageImage(
        name=stage.name, indices=indices, levels=levels, data_range=(lo, hi), sequential=sequential,
        masked_cells=masked, fitted=fit, region=region, step=reduced[0].step if reduced else (1, 1), nan_cells=nans,
        scale_used=scale, progress=progress, pixels=tuple(max_side) if isinstance(max_side, tuple) else None,
        structure=long_structure(stage) if region is None and heads is None else None,  # a long input's band, sinks
    )  # fmt: skip
