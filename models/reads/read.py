"""Every read of a traced layer as one pure function: ``read(trace, ReadRequest) -> numpy``.

The window, the command line and a notebook are three clients of one description: what the window
paints is ``read(trace, request)`` of the shown run, and the same call on a notebook's
:class:`models.api.Trace` makes the same picture::

    from models import api
    from models.reads.read import ReadRequest, read

    trace = api.toy("The cat sat on the mat.", heads=2, mask="causal")
    read(trace, ReadRequest("weights", pixels=(300, 300))).indices   # the heatmaps' uint8 colour indices
    read(trace, ReadRequest("weights", kind="rows", heads=(1,), region=(2, 4, 0, 0)))  # rows 2:4 of head 1
    read(trace, ReadRequest("weights", kind="cell", cell=(1, 3, 2)))  # one number: head 1, row 3, col 2

A :class:`ReadRequest` is frozen (hashable: a key of "the latest wins" in the window's jobs), names
the stage, the heads, a region, the device pixels and the colour scale; ``read`` computes nothing
that it was not asked for (a lazy n×n stage computes the rows read) and returns plain numpy (a
picture: a :class:`~models.engine.colour_index.StageImage`, uint8 indices and the levels behind them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.engine.colour_index import MAX_DISPLAY_SIDE, StageImage
from models.errors import InputError
from models.reads.picture import stage_image

KINDS = ("picture", "rows", "cell")


@dataclass(frozen=True)
class ReadRequest:
    """One read of one stage of a trace (see the module's doc)."""

    stage: str
    kind: str = "picture"  # "picture": colour indices; "rows": exact float rows; "cell": one exact number
    heads: tuple[int, ...] | None = None  # indices into the stage's heads (None: every head; rows: the first)
    region: tuple[int, int, int, int] | None = None  # rows r0:r1, cols c0:c1 (picture); rows r0:r1 (rows)
    pixels: tuple[int, int] | None = None  # the device pixels (rows, cols) a picture is reduced to
    scale: bool | str = False  # the colour scale (models.engine.colour_index.SCALES; False: "unit")
    levels: tuple[float, float] | None = None  # a zoomed region keeps the whole matrix's colours
    cell: tuple[int, ...] | None = None  # (head, row, col) or (row, col): the number of one cell

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"a read is one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind == "cell" and (self.cell is None or len(self.cell) not in (2, 3)):
            raise InputError("a cell read names its cell: cell=(head, row, col) or (row, col)")


def read(trace: Any, request: ReadRequest, should_stop: Callable[[], bool] | None = None) -> Any:
    """``request`` read from ``trace`` (a :class:`models.api.Trace` or the engine's AttentionTrace):
    a StageImage (picture), a float32 ``(rows, cols)`` array (rows) or a float (cell).
    ``should_stop``: a picture's reduction stops (models.config.Cancelled) when it turns true."""
    raw = getattr(trace, "raw", trace)
    if request.stage not in raw:
        raise InputError(f"this trace has no stage {request.stage!r}; its stages are {', '.join(raw.names)}")
    stage = raw[request.stage]
    if request.kind == "picture":
        return picture(stage, request, should_stop)
    if request.kind == "rows":
        head = request.heads[0] if request.heads else 0
        r0, r1 = request.region[:2] if request.region is not None else (0, stage.shape[-2])
        return np.array(stage.rows(head, r0, r1), np.float32)
    head, row, col = request.cell if len(request.cell) == 3 else (0, *request.cell)
    return float(np.array(stage.rows(head, row, row + 1), np.float32)[0, col])


def picture(stage, request: ReadRequest, should_stop: Callable[[], bool] | None = None) -> StageImage:
    """A stage's colour indices at ``request.pixels`` (None: whole, up to MAX_DISPLAY_SIDE a side)."""
    heads = list(request.heads) if request.heads is not None else None
    side = tuple(request.pixels) if request.pixels else MAX_DISPLAY_SIDE
    return stage_image(stage, request.scale, region=request.region, max_side=side, heads=heads,
                       should_stop=should_stop, levels=request.levels)  # fmt: skip
