"""Two runs side by side: the pinned run's and the current run's same stage and head, and their
difference (current − pinned). Numpy only (no Qt): the compare panel just paints what this returns.

The difference is taken cell by cell as the exports would give it (``<stage>.npy`` of each run,
subtracted), except that two equal cells (both −∞ included) give exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.engine.edited_runner import stage_delta
from models.engine.colour_index import SEQUENTIAL_STAGES, StageImage
from models.engine.trace import AttentionTrace, Stage
from models.reads.picture import stage_image

MAX_COMPARE_TOKENS = 2048  # beyond this the panel says so instead of reading two n×n matrices
COMPARE_SIDE = 512  # before the view is laid out: at most this many pixels a side (peak-keeping reduction)


@dataclass(frozen=True, eq=False)
class Comparison:
    stage: str
    title: str
    head: int  # 0-based head of both runs (0 for a stage without heads)
    message: str  # "" when the two were compared cell by cell; else why not (one line)
    pinned: StageImage | None = None
    current: StageImage | None = None
    delta: np.ndarray | None = None  # (rows, cols) float32, current − pinned; None when shapes differ
    difference: StageImage | None = None
    pinned_labels: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # rows, cols
    current_labels: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    pinned_axes: tuple[str, str, bool] = ("", "", False)  # rows' and columns' axis ("query", "key"), cross
    current_axes: tuple[str, str, bool] = ("", "", False)
    largest: tuple[int, int, float] | None = None  # (row, col, value) of the largest |Δ|

    def largest_text(self) -> str:
        """The largest change, named: "largest Δ: it × animal = +0.213"."""
        if self.delta is None:
            return ""
        if self.largest is None or self.largest[2] == 0.0:
            return "no change: both runs give the same numbers here"
        row, col, value = self.largest
        rows, cols = self.current_labels
        return f"largest Δ: {_label(rows, row)} × {_label(cols, col)} = {value:+.4g}"


def compare(pinned: AttentionTrace, current: AttentionTrace, stage: str, head: int,
            fit: bool | str = False, side: int | tuple[int, int] = COMPARE_SIDE) -> Comparison:  # fmt: skip
    """Compare ``stage`` (head ``head``, clamped to each run's heads) of the two runs, each matrix
    reduced to ``side`` (the device pixels the compare view draws it on: never scaled again)."""
    missing = [name for name, trace in (("pinned", pinned), ("current", current)) if stage not in trace]
    if missing:
        return Comparison(stage, stage, head, f"the {' and '.join(missing)} run has no stage {stage!r}")
    a, b = pinned[stage], current[stage]
    tokens = max(len(t) for t in (pinned.query_tokens, pinned.key_tokens, current.query_tokens, current.key_tokens))
    if tokens > MAX_COMPARE_TOKENS:
        return Comparison(stage, b.title, head,
                          f"comparing runs is limited to {MAX_COMPARE_TOKENS} tokens; these have {tokens}")  # fmt: skip
    ha, hb = min(head, a.heads - 1), min(head, b.heads - 1)
    ma, mb = a.head(ha), b.head(hb)  # (rows, cols) each
    same = a.shape == b.shape
    bound = _bound(ma, mb)
    levels = None if stage in SEQUENTIAL_STAGES else (-bound, bound)  # one scale for both runs
    common = dict(fit=fit, max_side=side, levels=levels)
    kwargs = dict(pinned=stage_image(_flat(a, ma), **common), current=stage_image(_flat(b, mb), **common),
                  pinned_labels=(a.row_labels, a.col_labels), current_labels=(b.row_labels, b.col_labels),
                  pinned_axes=_axes(a, pinned), current_axes=_axes(b, current))  # fmt: skip
    if not same:
        message = (f"shapes differ: pinned {_shape(a)}, current {_shape(b)}; "
                   "shown side by side without a difference")  # fmt: skip
        return Comparison(stage, b.title, hb, message, **kwargs)
    delta = stage_delta(ma, mb)  # (rows, cols)
    diff = _flat(b, delta)
    diff.difference = True  # painted on the diverging map centred on 0, weights included
    finite = np.where(np.isnan(delta), 0.0, delta)
    largest = None
    if delta.size:
        r, c = np.unravel_index(int(np.argmax(np.abs(finite))), delta.shape)
        largest = (int(r), int(c), float(delta[r, c]))
    return Comparison(stage, b.title, hb, "", delta=delta, largest=largest,
                      difference=stage_image(diff, max_side=side), **kwargs)  # fmt: skip


def _flat(like: Stage, matrix: np.ndarray) -> Stage:
    """One head of ``like`` as a 2-D stage (what stage_image converts)."""
    return Stage(like.name, like.title, like.formula, like.description, matrix, like.row_labels,
                 like.col_labels, like.row_axis, like.col_axis)  # fmt: skip


def _axes(stage: Stage, trace: AttentionTrace) -> tuple[str, str, bool]:
    """What the stage's rows and columns are, and whether the run is cross-attention (the axes then
    say which sentence)."""
    return stage.row_axis, stage.col_axis, bool(trace.config.get("cross"))


def _bound(*matrices: np.ndarray) -> float:
    """The largest finite |value| of the matrices (1.0 when there is none): a shared symmetric scale."""
    bound = 0.0
    for m in matrices:
        finite = m[np.isfinite(m)]
        if finite.size:
            bound = max(bound, float(np.abs(finite).max()))
    return bound or 1.0


def _shape(stage: Stage) -> str:
    return "×".join(map(str, stage.shape))


def _label(labels: tuple[str, ...], i: int) -> str:
    return labels[i] if i < len(labels) else str(i)


def changes(pinned: AttentionTrace, current: AttentionTrace) -> str:
    """What differs between the runs, in one line: "temperature 1.0 → 2.0, sentence"."""
    a, b = pinned.config, current.config
    parts = [f"{key} {a.get(key)} → {b.get(key)}" for key in dict.fromkeys([*a, *b])
             if key not in ("device", "max_tokens") and a.get(key) != b.get(key)]  # fmt: skip
    if (pinned.query_tokens, pinned.key_tokens) != (current.query_tokens, current.key_tokens):
        parts.append("tokens")
    if pinned.meta.get("edits") != current.meta.get("edits"):
        parts.append("edits")
    return ", ".join(parts) if parts else "nothing yet: change the sentence or a setting"
