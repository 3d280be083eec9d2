"""What-if edits: change one number of an input-side stage and recompute everything after it.

An :class:`Edit` names a stage, a cell indexed like the exported ``<stage>.npy`` and a value:

- ``embeddings``, ``input``, ``query_input``: cell ``(row, col)`` of the ``(n, d_model)`` matrix;
  an edited input changes Q, K and V (an edited embedding also the input);
- ``q``, ``k``, ``v``: cell ``(head, row, col)`` of ``(h, n, d)``; the n×n stages and the outputs follow;
- ``scores``: cell ``(head, query, key)``; scaled, masked, weights and the outputs follow;
- ``mask``: cell ``(query, key)``, value 1 (hidden) or 0 (shown): the run's mask becomes a
  custom one, the very matrix ``export --mask custom --mask-file`` takes (see :func:`hide_key`).

:func:`apply_edits` reruns the toy engine (:func:`models.engine.pipeline.run`) with the edits applied
at their stage, so every later stage comes from the same code as without edits. Edits are pure:
the request and any trace computed before are never changed. No edits gives the same numbers as
``pipeline.run(request)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.config import AttentionRequest, InputError
from models.engine import pipeline
from models.engine.host import to_numpy
from models.engine.trace import AttentionTrace

TENSOR_STAGES = ("embeddings", "input", "query_input", "q", "k", "v")
EDITABLE = (*TENSOR_STAGES, "scores", "mask")


@dataclass(frozen=True)
class Edit:
    stage: str
    cell: tuple[int, ...]
    value: float

    def to_json(self) -> dict:
        return {"stage": self.stage, "cell": list(self.cell), "value": self.value}

    @classmethod
    def from_json(cls, data) -> Edit:
        """One edit from its JSON form; InputError when it is not one."""
        try:
            stage, cell, value = data["stage"], data["cell"], data["value"]
            ok = isinstance(stage, str) and isinstance(cell, list) and all(type(c) is int for c in cell)
            ok = ok and type(value) in (int, float, bool)
        except (TypeError, KeyError):
            ok = False
        if not ok:
            raise InputError(f"not an edit: {str(data)[:80]}")
        return cls(stage, tuple(cell), float(value))


def hide_key(query: int, key: int, hidden: bool = True) -> Edit:
    """Hide key ``key`` from query ``query`` (``hidden=False``: show it, even if the mask hid it)."""
    return Edit("mask", (query, key), 1.0 if hidden else 0.0)


def hide_token(key: int, n_q: int, hidden: bool = True) -> list[Edit]:
    """Hide key ``key`` from every one of the ``n_q`` queries."""
    return [hide_key(i, key, hidden) for i in range(n_q)]


def check_edit(edit: Edit, shapes: dict[str, tuple[int, ...]], editable: Sequence[str] = EDITABLE) -> None:
    if edit.stage not in editable:
        raise InputError(f"cannot edit stage {edit.stage!r}; editable: {', '.join(editable)}")
    if edit.stage not in shapes:
        raise InputError(f"this computation has no stage {edit.stage!r} to edit")
    shape = shapes[edit.stage]
    if len(edit.cell) != len(shape) or not all(0 <= c < n for c, n in zip(edit.cell, shape, strict=True)):
        raise InputError(f"edit of {edit.stage}: cell {list(edit.cell)} is outside its shape {list(shape)}")
    if not math.isfinite(edit.value) or abs(edit.value) > np.finfo(np.float32).max:
        raise InputError(f"edit of {edit.stage}: value {edit.value!r} is not a finite float32 number")


def edit_shapes(trace: AttentionTrace) -> dict[str, tuple[int, ...]]:
    shapes = {name: trace[name].shape for name in (*TENSOR_STAGES, "scores") if name in trace}
    shapes["mask"] = (len(trace.query_tokens), len(trace.key_tokens))
    if "scores" in shapes:  # the keys only: a learned sink's column (gpt-oss) is not a score
        shapes["scores"] = (*shapes["scores"][:2], len(trace.key_tokens))
    return shapes


def mask_matrix(request: AttentionRequest, n_q: int, n_k: int) -> np.ndarray:
    """The run's mask as an ``(n_q, n_k)`` bool matrix, True = hidden (what the pipeline applies)."""
    rows = pipeline.variant(request, n_q, n_k).mask.rows(0, n_q, n_k, torch.device("cpu"))
    return np.zeros((n_q, n_k), bool) if rows is None else to_numpy(rows).copy()


def edited_request(request: AttentionRequest, edits: Sequence[Edit], n_q: int, n_k: int) -> AttentionRequest:
    """``request`` with the mask edits folded into a custom mask (unchanged when there are none)."""
    cells = [e for e in edits if e.stage == "mask"]
    if not cells:
        return request
    hidden = mask_matrix(request, n_q, n_k)
    for e in cells:
        hidden[e.cell] = bool(e.value)
    config = request.config.replace(mask="custom", pad_positions=())
    return dataclasses.replace(request, config=config, custom_mask=hidden)


def apply_edits(request: AttentionRequest, edits: Iterable[Edit], original: AttentionTrace | None = None,
                should_stop=None) -> AttentionTrace:  # fmt: skip
    """The trace of ``request`` with ``edits`` applied (later edits of a cell win).

    ``original`` (the trace without edits, if at hand) is only read for the shapes that the
    edits are checked against; it is never changed."""
    edits = list(edits)
    if not edits:
        return pipeline.run(request, should_stop)
    if original is None:
        original = pipeline.run(request, should_stop)  # cheap: the n×n stages are not computed
    shapes = edit_shapes(original)
    for e in edits:
        check_edit(e, shapes)
    by_stage: dict[str, list[Edit]] = {}
    for e in edits:
        by_stage.setdefault(e.stage, []).append(e)

    def override(name: str, tensor: torch.Tensor) -> torch.Tensor:
        cells = by_stage.get(name)
        if not cells:
            return tensor
        tensor = tensor.clone()  # never write into a tensor someone else holds
        for e in cells:
            tensor[e.cell] = e.value
        return tensor

    scores = {e.cell: e.value for e in by_stage.get("scores", [])}
    req = edited_request(request, edits, *shapes["mask"])
    trace = pipeline.run(req, should_stop, override=override, score_edits=scores)
    trace.meta["edits"] = [e.to_json() for e in edits]
    return trace


@dataclass(frozen=True)
class Difference:
    """``edited − original`` of one head of one stage, and its largest change."""

    delta: np.ndarray  # (rows, cols); 0 where both are equal (both −∞ included)
    row: int
    col: int
    row_label: str
    col_label: str
    value: float  # delta[row, col]: the change of largest magnitude (±inf when a cell was hidden)


def difference(original: AttentionTrace, edited: AttentionTrace, stage: str, head: int = 0) -> Difference:
    """Edited minus original, for ``stage`` (head ``head`` of a per-head stage)."""
    for trace in (original, edited):
        if stage not in trace:
            raise InputError(f"no stage {stage!r} to compare; this computation has {', '.join(trace.names)}")
    sa, sb = original[stage], edited[stage]
    if sa.shape != sb.shape:
        raise InputError(f"{stage} has shape {list(sa.shape)} in one run and {list(sb.shape)} in the other")
    a, b = sa.head(head).astype(np.float64), sb.head(head).astype(np.float64)
    with np.errstate(invalid="ignore"):
        delta = np.where(a == b, 0.0, b - a)  # (rows, cols)
    delta = np.nan_to_num(delta, nan=0.0, posinf=np.inf, neginf=-np.inf)
    r, c = np.unravel_index(int(np.argmax(np.abs(delta))), delta.shape) if delta.size else (0, 0)
    label = lambda labels, i: labels[i] if i < len(labels) else str(i)  # noqa: E731
    return Difference(delta, int(r), int(c), label(sb.row_labels, r), label(sb.col_labels, c),
                      float(delta[r, c]) if delta.size else 0.0)  # fmt: skip
