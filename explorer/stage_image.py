"""Stage array -> uint8 colour indices, the form a heatmap paints in well under a millisecond.

Numpy only (no Qt, no torch): it runs on the worker thread, so the GUI thread never touches
the float matrices except to read one value under the mouse.

Index layout of the 256-entry lookup table the views build (see widgets/colormaps.py):
    0 .. 254   the colour map, from ``levels[0]`` to ``levels[1]``
    255        masked cells (−∞), painted a distinct grey
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.trace import Stage

COLOURS = 255  # indices 0..254 carry the colour map
MASKED_INDEX = 255
SEQUENTIAL_STAGES = frozenset({"weights"})  # probabilities: 0..1 on a sequential map
# Above this many elements per head a matrix is shown subsampled: a screen has fewer pixels
# than that anyway, and Qt would drop the same rows when scaling. Hover still reads the
# exact float array, so no number is lost.
MAX_DISPLAY_SIDE = 1024


@dataclass(frozen=True, eq=False)
class StageImage:
    """What a heatmap needs to paint one stage: colour indices plus the numbers behind them."""

    name: str
    indices: np.ndarray  # (heads, rows', cols') uint8, rows'/cols' <= MAX_DISPLAY_SIDE
    levels: tuple[float, float]  # values painted with index 0 and index 254
    data_range: tuple[float, float]  # exact finite min and max (nan, nan when none)
    sequential: bool  # True: 'weights' on a sequential map; False: diverging map symmetric about 0
    masked_cells: int  # how many −∞ cells the stage holds
    fitted: bool = False  # converted for "fit to data" (it changes the levels of sequential stages only)


def colour_levels(stage: Stage, finite_min: float, finite_max: float, fit: bool = False) -> tuple[float, float]:
    """Weights use 0..1 so that colours mean the same thing at every size, or with ``fit``
    0..their largest value (many keys: every weight is small, and 0..1 paints them all dark);
    signed matrices are symmetric about 0 so that white means zero, and always fit their data."""
    if stage.name in SEQUENTIAL_STAGES:
        return (0.0, finite_max) if fit and np.isfinite(finite_max) and finite_max > 0.0 else (0.0, 1.0)
    bound = max(abs(finite_min), abs(finite_max))
    if not np.isfinite(bound) or bound == 0.0:
        bound = 1.0
    return -bound, bound


def _display_step(size: int) -> int:
    return -(-size // MAX_DISPLAY_SIDE)  # ceil: 2048 -> 2, 1000 -> 1


def stage_image(stage: Stage, fit: bool = False) -> StageImage:
    """Convert every head of ``stage`` to uint8 colour indices (``fit``: see colour_levels)."""
    array = stage.array if stage.per_head else stage.array[None]  # (heads, rows, cols)
    finite = np.isfinite(array)
    all_finite = bool(finite.all())
    if all_finite:
        lo, hi = (float(array.min()), float(array.max())) if array.size else (np.nan, np.nan)
    elif finite.any():
        lo, hi = float(array[finite].min()), float(array[finite].max())
    else:
        lo, hi = np.nan, np.nan
    levels = colour_levels(stage, lo, hi, fit)

    row_step, col_step = _display_step(array.shape[1]), _display_step(array.shape[2])
    shown = array[:, ::row_step, ::col_step]
    scale = (COLOURS - 1) / (levels[1] - levels[0])
    # (x - lo) * scale in float32, rounded and clipped, one head at a time to bound the temporary.
    indices = np.empty(shown.shape, dtype=np.uint8)
    for h in range(shown.shape[0]):
        x = np.subtract(shown[h], np.float32(levels[0]), dtype=np.float32)
        x *= np.float32(scale)
        np.clip(x, 0, COLOURS - 1, out=x)  # NaN stays NaN, −∞ becomes 0 here ...
        np.rint(x, out=x)
        indices[h] = x.astype(np.uint8) if all_finite else np.nan_to_num(x).astype(np.uint8)
        if not all_finite:
            indices[h][~np.isfinite(shown[h])] = MASKED_INDEX  # ... and is marked masked here
    masked = 0 if all_finite else int(np.count_nonzero(np.isneginf(array)))
    return StageImage(
        name=stage.name, indices=indices, levels=levels, data_range=(lo, hi),
        sequential=stage.name in SEQUENTIAL_STAGES, masked_cells=masked, fitted=fit,
    )  # fmt: skip
