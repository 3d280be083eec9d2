"""The two colour maps and their 256-entry lookup tables (index 255 = masked grey).

See models/engine/colour_index.py for the index layout; the LUTs are built once on the GUI thread.
"""

from __future__ import annotations

import functools

import numpy as np
import pyqtgraph as pg

from models.engine.colour_index import COLOURS, MASKED_INDEX, MIXED_OFFSET, NAN_INDEX

DIVERGING = "CET-D1"  # blue - near white - red: signed values, white is 0
SEQUENTIAL = "viridis"  # dark - yellow: weights in 0..1
MASKED_RGB = (118, 118, 118)  # a mid grey no colour of either map comes close to
MASKED_HEX = "#767676"
NAN_RGB = (255, 0, 170)  # a NaN is never painted as masked: loud pink, in no colour map
NAN_HEX = "#ff00aa"
# Every label, title, axis and tick text near black on white: pyqtgraph's default grey (150, 150, 150)
# read poorly (3:1 against white). Set as pyqtgraph's foreground in explorer/widgets/__init__.py.
TEXT_RGB = (25, 25, 25)
CELL_BORDER_RGB = (150, 150, 150)  # thin lines between the cells of a grid one clicks (the mask painter)


@functools.cache
def colour_map(sequential: bool) -> pg.ColorMap:
    return pg.colormap.get(SEQUENTIAL if sequential else DIVERGING)


@functools.cache
def lookup_table(sequential: bool) -> np.ndarray:
    """(256, 3) uint8: the map over indices 0..126, the same washed with grey (partly masked blocks),
    NaN pink, masked grey."""
    lut = np.empty((MASKED_INDEX + 1, 3), dtype=np.uint8)
    colours = colour_map(sequential).getLookupTable(nPts=COLOURS, alpha=False)
    lut[:COLOURS] = colours
    lut[MIXED_OFFSET : MIXED_OFFSET + COLOURS] = (colours.astype(np.uint16) + np.array(MASKED_RGB)) // 2
    lut[NAN_INDEX] = NAN_RGB
    lut[MASKED_INDEX] = MASKED_RGB
    lut.setflags(write=False)
    return lut


@functools.cache
def sign_colours() -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(negative, positive) RGB: the two ends of the diverging map, for bars whose sign matters (a
    difference's focus bars): its middle is near white and would vanish on a white chart."""
    lut = lookup_table(False)
    return tuple(int(c) for c in lut[0]), tuple(int(c) for c in lut[COLOURS - 1])


@functools.cache
def mask_cell_colours() -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(visible, hidden) cell colours of a painted mask: a hidden pair in the masked grey every heatmap
    paints it in, a visible one in the weights map's top colour washed with white (light, never the
    white of the background)."""
    top = colour_map(True).getLookupTable(nPts=COLOURS, alpha=False)[-1].astype(int)
    visible = tuple(int(c + 3 * 255) // 4 for c in top)
    return visible, MASKED_RGB


def range_legend(image) -> str:
    """The line above the heatmaps (rich text): the data's range, and the colours of NaN and
    masked cells when the image (a StageImage) has any."""
    lo, hi = image.data_range
    if np.isfinite(lo):
        text = f"min\u00a0{lo:.4g}   max\u00a0{hi:.4g}"  # a wrapped line keeps each number with its name
    else:
        text = f"max\u00a0{hi:.4g}" if np.isfinite(hi) else "no finite values"
    if image.nan_cells:
        text += f'   <span style="background:{NAN_HEX};color:white">&nbsp;pink&nbsp;</span> = NaN'
    if image.masked_cells:
        text += f'   <span style="background:{MASKED_HEX};color:white">&nbsp;grey&nbsp;</span> = masked (−∞)'
    if image.progress < 1.0:  # a long input's overview, still streaming in
        text += f"   computing: {image.progress:.0%} of the rows"
    return text
