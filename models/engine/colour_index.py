"""Colour indices: the layout, levels and conversion of a reduced stage (numpy only, widgets may import it).

Stage -> uint8 colour indices at display resolution, the form a heatmap paints in well under a millisecond.

Made off the GUI thread (models.reads.picture), so the GUI thread never touches the float matrices except to read one
value under the mouse. A matrix larger than the screen is reduced by blocks that keep every peak
(models.engine.reduce), never by striding; a zoomed region is reduced again from the exact values.

Index layout of the 256-entry lookup table the views build (see widgets/colormaps.py):
    0 .. 126    the colour map, from ``levels[0]`` to ``levels[1]``
    127 .. 253  the same colours washed towards grey: a block mixing masked and visible cells
    254         NaN (never painted as masked)
    255         masked cells (−∞), a distinct grey
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.engine.long_structure import LongStructure
from models.engine.trace import Stage

COLOURS = 127  # indices 0..126 carry the colour map
MIXED_OFFSET = COLOURS  # 127..253: the colour of the visible peak, washed (partly masked block)
NAN_INDEX = 254
MASKED_INDEX = 255
SEQUENTIAL_STAGES = frozenset({"weights", "weighted_norms", "value_norms"})  # never negative: a sequential map
SCALES = ("unit", "fit", "log", "auto")  # weights: 0..1, 0..their max, log10 of [smallest shown, 1], chosen
AUTO = "auto"  # the scale chosen from the data: log10 once rows hold more than LOG_ABOVE_KEYS keys
LOG_ABOVE_KEYS = 256  # a row of more keys than this has every weight small: 0..1 is a flat purple square
LOG_FLOOR = 1e-6  # the log scale never reaches below this weight
# A matrix is drawn at most this many pixels a side; hover still reads the exact value.
MAX_DISPLAY_SIDE = 1024


@dataclass(frozen=True, eq=False)
class StageImage:
    """What a heatmap needs to paint one stage: colour indices plus the numbers behind them."""

    name: str
    indices: np.ndarray  # (heads, rows', cols') uint8, rows'/cols' <= pixels or MAX_DISPLAY_SIDE
    levels: tuple[float, float]  # values painted with index 0 and index COLOURS − 1 (log10 for "log")
    data_range: tuple[float, float]  # exact finite min and max (nan, nan when none)
    sequential: bool  # True: 'weights' on a sequential map; False: diverging map symmetric about 0
    masked_cells: int  # how many blocks hold a −∞ cell (0: no grey legend needed)
    fitted: bool | str = False  # the colour scale it was converted for (see SCALES)
    region: tuple[int, int, int, int] | None = None  # rows r0:r1, cols c0:c1 shown (None: all)
    step: tuple[int, int] = (1, 1)  # cells per pixel
    nan_cells: int = 0
    scale_used: str = ""  # the scale the indices were made with ("auto" resolved); "" = as_scale(fitted)
    progress: float = 1.0  # share of the rows done (a long input's overview streams in, top to bottom)
    pixels: tuple[int, int] | None = None  # the device pixels (rows, cols) it was reduced to (None: MAX_DISPLAY_SIDE)
    structure: LongStructure | None = None  # a long input's band edges, sinks and sink share (issue 34)

    @property
    def scale(self) -> str:
        return self.scale_used or as_scale(self.fitted)


def as_scale(fit: bool | str) -> str:
    if isinstance(fit, str):
        assert fit in SCALES, fit
        return fit
    return "fit" if fit else "unit"


def resolve_scale(fit: bool | str, stage: Stage) -> str:
    """The scale a stage is painted with: "auto" becomes log for weights whose rows hold more than
    LOG_ABOVE_KEYS keys (every weight is small there), else 0..1."""
    scale = as_scale(fit)
    if scale != AUTO:
        return scale
    sequential = stage.name in SEQUENTIAL_STAGES and not getattr(stage, "difference", False)
    return "log" if sequential and stage.shape[-1] > LOG_ABOVE_KEYS else "unit"


def colour_levels(stage: Stage, finite_min: float, finite_max: float, fit: bool | str = False) -> tuple[float, float]:
    """Weights use 0..1 so that colours mean the same thing at every size, or with "fit" 0..their
    largest value, or with "log" log10 of [their smallest positive value, 1]; signed matrices are
    symmetric about 0 so that white means zero, and always fit their data."""
    scale = as_scale(fit)
    if stage.name in SEQUENTIAL_STAGES and not getattr(stage, "difference", False):  # a Δ is signed
        unbounded = stage.name != "weights"  # norms have no natural top: 0..their largest value
        if (scale == "fit" or (unbounded and scale == "unit")) and np.isfinite(finite_max) and finite_max > 0.0:
            return 0.0, finite_max
        if scale == "log":
            top = finite_max if np.isfinite(finite_max) and finite_max > LOG_FLOOR else 1.0
            # every weight alike (two peaks of 1): the top still paints as the top colour
            floor = finite_min if np.isfinite(finite_min) and LOG_FLOOR < finite_min < top else top * 1e-3
            floor = max(floor, LOG_FLOOR)
            return float(np.log10(floor)), float(np.log10(max(top, floor * 10)))
        return 0.0, 1.0
    bound = max(abs(finite_min), abs(finite_max))
    if not np.isfinite(bound) or bound == 0.0:
        bound = 1.0
    return -bound, bound


LN10 = float(np.log(10.0))


def to_indices(peak: np.ndarray, masked: np.ndarray | None, levels: tuple[float, float],
               log: bool) -> tuple[np.ndarray, int]:  # fmt: skip
    """Colour indices of one reduced head (``masked``: the share of −∞ cells per pixel, or None),
    and how many of its pixels are NaN."""
    x = peak.astype(np.float32, copy=True)
    nan = np.isnan(x)
    hidden = np.isneginf(x)
    low, high = levels
    if log:  # natural log, levels (log10) scaled to it: numpy's float32 log is ~4× faster than log10
        with np.errstate(divide="ignore", invalid="ignore"):
            np.log(np.maximum(x, np.float32(10.0**low), out=x), out=x)  # x is our own copy
        low, high = low * LN10, high * LN10
    x -= np.float32(low)
    x *= np.float32((COLOURS - 1) / (high - low))
    np.clip(x, 0, COLOURS - 1, out=x)
    np.rint(x, out=x)
    if nan.any():  # NaN cells get NAN_INDEX below; zero them first so that the cast is defined
        x[nan] = 0.0
    indices = x.astype(np.uint8)
    if masked is not None:
        mixed = (masked > 0) & ~hidden
        indices[mixed] += MIXED_OFFSET
    indices[hidden] = MASKED_INDEX
    indices[nan] = NAN_INDEX
    return indices, int(nan.sum())
