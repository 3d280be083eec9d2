"""The device pixels a stage will be drawn on, as far as the worker can know them when a run is computed.

The view hands the worker, with each request, the plots it has laid out now (:class:`PlotsOnScreen`:
their device pixels, how many, and the cells and head choice they were laid out for). The worker
reduces a stage to those pixels only where the new stage will be laid out the same: as many plots,
matrices of the same shape. A stage whose cells fit any plot (at most :data:`SURE_FIT` a side)
needs no reduction at all and is made whole. Any other stage (the first result, before any plot
exists; another head count; another shape) is not made with the run: the view lays its grid out
first and asks for it at its plots' own pixels (``MatrixView.image_missing``). Either way a stage
larger than its plot is reduced once and painted once (napari's slicer asks at the canvas's size).
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.heads import heads_shown
from models.engine.trace import Stage

SURE_FIT = 48  # cells a side that no plot is smaller than (the grid keeps images this tall: MIN_IMAGE_PX)
SAME_SHAPE = 0.1  # matrices whose rows : cols differ by less than this share are laid out alike


def cells(stage: Stage) -> tuple[int, int]:
    """(rows, cols) of each of the stage's matrices, as its plots show them."""
    return len(stage.row_labels), len(stage.col_labels)


@dataclass(frozen=True)
class PlotsOnScreen:
    """The view's plots now: each ``pixels`` (rows, cols) device pixels, ``count`` of them, laid out for
    matrices of ``shape`` cells with the head choice ``head`` (a query head, or ALL_HEADS)."""

    pixels: tuple[int, int]
    count: int
    shape: tuple[int, int]
    head: int

    def laid_out_alike(self, stage: Stage) -> bool:
        """True when ``stage`` will be laid out as these plots are: as many plots, the same aspect."""
        rows, cols = cells(stage)
        if len(heads_shown(stage, self.head)) != self.count or min(rows, cols, *self.shape) < 1:
            return False
        return abs((rows / cols) / (self.shape[0] / self.shape[1]) - 1.0) < SAME_SHAPE


def pixels_for(plots: PlotsOnScreen | None, stage: Stage) -> tuple[int, int] | None:
    """The device pixels to make ``stage``'s picture at, now; None when they are not known yet (the view
    asks for it once its grid is laid out)."""
    if plots is not None and plots.laid_out_alike(stage):
        return plots.pixels
    rows, cols = cells(stage)
    return (rows, cols) if max(rows, cols) <= SURE_FIT else None  # whole cells: no reduction to get wrong
