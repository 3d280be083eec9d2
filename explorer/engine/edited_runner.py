"""The worker's runner of a toy RunSpec with what-if edits (no Qt).

:func:`run_edited` runs :func:`models.engine.edits.apply_edits`; with ``difference=True`` the trace holds
``edited − original`` of every stage instead (0 where both are equal, −∞ cells included), stages
marked ``difference`` so that they are painted on the diverging map. A model's layer with edits is
answered by explorer.engine.pretrained_runner (same display).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from models.config import AttentionRequest
from models.engine import pipeline
from models.engine.edits import Edit, apply_edits
from models.engine.trace import AttentionTrace, Stage


def run_edited(request: AttentionRequest, edits: tuple[Edit, ...], difference: bool = False,
               should_stop=None) -> AttentionTrace:  # fmt: skip
    original = pipeline.run(request, should_stop)
    edited = apply_edits(request, edits, original, should_stop)
    return shown_edits(original, edited, len(edits), difference)


def shown_edits(original: AttentionTrace, edited: AttentionTrace, count: int, difference: bool) -> AttentionTrace:
    """The edited trace (or its difference from the original) with a notice saying how many edits."""
    notice = f"{count} edit{'s' if count != 1 else ''} applied (Edit menu: Undo, Redo, Reset edits)"
    trace = difference_trace(original, edited) if difference else edited
    trace.meta["notices"] = [*(trace.meta.get("notices") or ()), notice]
    return trace


def stage_delta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b − a`` as float32; 0 where both are equal (both −∞ included), NaN where either is NaN."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        delta = np.where(a64 == b64, 0.0, b64 - a64)
    return delta.astype(np.float32)


def difference_trace(original: AttentionTrace, edited: AttentionTrace) -> AttentionTrace:
    """Every stage the two traces share, as edited minus original."""
    stages = []
    for stage in edited.stages:
        if stage.name not in original or original[stage.name].shape != stage.shape:
            continue
        delta = stage_delta(original[stage.name].array, stage.array)
        diff = Stage(stage.name, f"Δ {stage.title}", f"edited − original: {stage.formula}", stage.description,
                     delta, stage.row_labels, stage.col_labels, stage.row_axis, stage.col_axis, stage.per_head,
                     stage.shapes, stage.head_groups)  # fmt: skip
        diff.difference = True  # painted on the diverging map, weights included
        stages.append(diff)
    return dataclasses.replace(edited, stages=tuple(stages), meta={**edited.meta, "difference": True})


def largest_change(stage: Stage, heads: list[int]) -> tuple[int, int, int, float] | None:
    """``(head, row, col, value)`` of the largest |delta| among ``heads`` of a difference stage."""
    best = None
    for h in heads:
        m = stage.head(h)  # (rows, cols)
        if not m.size:
            continue
        finite = np.where(np.isnan(m), 0.0, m)
        r, c = np.unravel_index(int(np.argmax(np.abs(finite))), m.shape)
        if best is None or abs(finite[r, c]) > abs(best[3]):
            best = (h, int(r), int(c), float(m[r, c]))
    return best
