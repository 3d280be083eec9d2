"""What the compute worker (explorer/engine/worker.py) makes of a computed trace beside its images: the
layer's weights for the inspector, the order of its background conversions, and a failure's one line."""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass

import numpy as np
import torch

from explorer.images.plot_pixels import PlotsOnScreen, pixels_for
from models import api
from models.config import AttentionRequest, Cancelled, InputError
from models.engine.colour_index import StageImage
from models.engine.trace import AttentionTrace
from models.memory import OUT_OF_MEMORY, is_out_of_memory
from models.reads.params import toy_params
from models.reads.read import ReadRequest, read
from models.runspec import RunSpec


def leave_a_core_to_the_gui() -> None:
    """torch on every core but one, so that painting never queues behind a computation
    (torch's thread count is the process's: every job that computes calls this)."""
    torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))


def shown_run(models, request: object, trace: AttentionTrace) -> api.Trace:
    """The run as the front door holds it (models.api.Trace, as a notebook's): the trace, the request as
    traced, the model that made it (the runner's cached one) and the layer's parameters, read here, on the
    worker, for the inspector (api.layer_params; None for an edited run, whose weights are the unedited
    ones, or when they cannot be read: the inspector then says it cannot explain)."""
    spec = request if isinstance(request, RunSpec) else None
    engine = models.model(spec.model, spec.device, spec.dtype) if spec is not None and spec.uses_model else None

    def params():
        try:
            if isinstance(request, AttentionRequest):
                return toy_params(request)
            if spec is None or spec.edits or spec.difference:
                return None
            return api.layer_params(spec, trace, engine)
        except Exception:  # noqa: BLE001 - the trace still shows
            return None

    run = api.Trace(trace, request.as_traced(trace) if spec is not None else request, params, engine)
    run.params  # noqa: B018 - read now, off the GUI thread
    return run


def small_values(trace: AttentionTrace, focus: str) -> dict[str, list[np.ndarray]]:
    """The exact values of the focused stage of a small trace (and, for the weights, the masked scores),
    each of at most PREFETCH_CELLS cells, as the numbers in the cells read them (explorer.widgets.stage_rows):
    read here, with the result (the other stages are read when shown, as the read-ahead reads them)."""
    from explorer.widgets import stage_rows

    limit = stage_rows.PREFETCH_CELLS  # read when asked: a test may change it
    cells = {s.name: int(np.prod(s.shape)) for s in trace.stages}
    names = [n for n in ([focus, "masked"] if focus == "weights" else [focus]) if n in cells and cells[n] <= limit]
    return {n: [read(trace, ReadRequest(n, "rows", heads=(h,))) for h in range(trace[n].heads)] for n in names}


@dataclass(frozen=True)
class Job:
    """A request handed to the compute worker (explorer.engine.worker), with what its pictures are for."""

    generation: int
    request: object
    focus_stage: str | None
    fit_colours: bool | str = False  # the colour scale its images are made for (the state's, handed over)
    plots: PlotsOnScreen | None = None  # the view's plots now: its images reduced to their pixels (pixels_for)


def first_images(trace: AttentionTrace, first: list[str], focus: str, plots: PlotsOnScreen | None, fit,
                 should_stop) -> dict[str, StageImage]:  # fmt: skip
    """The pictures made with a run: of the stages ``first``, the one shown (``focus``) reduced once, to the
    pixels of the plots it will be drawn on, left out where it may not be laid out as the ``plots`` now are
    (the view asks for it once it is); the others, made ahead for stepping, at those pixels or whole up to
    MAX_DISPLAY_SIDE (asked again if they do not fit)."""
    sides = {n: pixels_for(plots, trace[n]) for n in first}  # None: whole, up to MAX_DISPLAY_SIDE a side
    return {n: read(trace, ReadRequest(n, pixels=side, scale=fit), should_stop)
            for n, side in sides.items() if side or n != focus}  # fmt: skip


def background_order(todo: list[str], names: list[str], focus: str) -> list[str]:
    """Stages nearest the focused one first: those are the ones a user steps to next."""
    at = names.index(focus)
    return sorted(todo, key=lambda n: (abs(names.index(n) - at), names.index(n) < at))


def failure_kind(exc: BaseException) -> str:
    if isinstance(exc, InputError):
        return getattr(exc, "kind", "input")
    return "input" if isinstance(exc, Cancelled) or is_out_of_memory(exc) else "error"


def failure_message(exc: BaseException) -> str:
    if isinstance(exc, InputError):
        return str(exc)
    if is_out_of_memory(exc):  # torch raises RuntimeError, not MemoryError: the command line's one line
        return OUT_OF_MEMORY
    if isinstance(exc, Cancelled):
        return "computation cancelled"
    traceback.print_exception(exc)  # an engine bug: keep the traceback for whoever debugs it
    return f"engine error ({type(exc).__name__}): {exc}"
