"""The result of a computation: an ordered list of named stages, each a numpy array.

A trace is plain data (numpy + str), so it can cross threads, be exported without Qt and
be compared in tests. Views only ever read traces; they never compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The canonical order of stages; a trace holds the applicable subset, in this order.
STAGE_ORDER = (
    "embeddings",
    "positional_encoding",
    "input",
    "query_input",
    "q",
    "k",
    "v",
    "q_normed",
    "k_normed",
    "q_rotated",
    "k_rotated",
    "scores",
    "scaled",
    "softcapped",
    "masked",
    "weights",
    "head_output",
    "concat",
    "output",
)


@dataclass(frozen=True)
class Stage:
    """One step of the computation.

    ``array`` is either 2-D ``(rows, cols)`` or, for per-head stages, 3-D ``(h, rows, cols)``
    with the head axis first. ``row_labels``/``col_labels`` label the last two axes: token
    strings for token axes, feature indices (as strings) otherwise.
    """

    name: str
    title: str  # short human name, e.g. "Softmax weights"
    formula: str  # one-line formula, e.g. "A = softmax(S_masked / T)"
    description: str  # one plain-language sentence
    array: np.ndarray
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    row_axis: str = "token"  # what the rows are: "token", "query", "key", "feature"
    col_axis: str = "feature"
    per_head: bool = False
    shapes: str = ""  # the formula's operand shapes, per head, e.g. "(6×24)·(24×6) → 6×6"
    # For grouped-query attention: which key/value head each query head reads (len h).
    head_groups: tuple[int, ...] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def heads(self) -> int:
        return self.array.shape[0] if self.per_head else 1

    def head(self, i: int) -> np.ndarray:
        """The 2-D matrix of head ``i`` (or the whole matrix for a non-head stage)."""
        return self.array[i] if self.per_head else self.array


@dataclass(frozen=True)
class AttentionTrace:
    stages: tuple[Stage, ...]
    query_tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    config: dict[str, Any]  # JSON-safe description of what was computed
    device: str  # e.g. "cpu" or "cuda:0 (NVIDIA A100)"
    elapsed_ms: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. model name, layer, notices

    def __post_init__(self) -> None:
        names = [s.name for s in self.stages]
        assert len(set(names)) == len(names), f"duplicate stage names: {names}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    def __getitem__(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage {name!r}; this trace has {', '.join(self.names)}")

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def index(self, name: str) -> int:
        return self.names.index(name)
