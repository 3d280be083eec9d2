"""The result of a computation: an ordered list of named stages, read as numpy when asked.

A trace is plain data (numpy + str) plus, for the n×n stages, a :class:`~models.engine.pairs.PairStore`
that computes a head or a block of rows when it is looked at. So a trace can cross threads, be
exported without Qt and be compared in tests, and 16,384 tokens never need 16,384² × h floats at
once. Views only ever read traces; they never compute.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from models.engine.stages import PAIR_STAGES, STAGE_ORDER


class PairStore(Protocol):
    """What a lazy stage reads from (models.engine.pairs.PairStore; named here so that this module,
    which the widgets import, does not import torch)."""

    heads: int
    n_q: int
    n_k: int
    cached_bytes: int

    def full(self, name: str) -> np.ndarray: ...
    def head(self, name: str, head: int) -> np.ndarray: ...
    def rows(self, name: str, head: int, r0: int, r1: int) -> np.ndarray: ...

__all__ = ["PAIR_STAGES", "STAGE_ORDER", "AttentionTrace", "Stage"]


class Stage:
    """One step of the computation.

    Its matrix is either 2-D ``(rows, cols)`` or, for per-head stages, 3-D ``(h, rows, cols)``
    with the head axis first. ``row_labels``/``col_labels`` label the last two axes: token
    strings for token axes, feature indices (as strings) otherwise. An n×n stage is *lazy*: it
    has a ``store`` and its numbers are computed per head and rows when read.
    """

    def __init__(self, name: str, title: str, formula: str, description: str, array: np.ndarray | None = None,
                 row_labels: tuple[str, ...] = (), col_labels: tuple[str, ...] = (), row_axis: str = "token",
                 col_axis: str = "feature", per_head: bool = False, shapes: str = "",
                 head_groups: tuple[int, ...] | None = None, *, store: PairStore | None = None,
                 compute: Callable[[], np.ndarray] | None = None,
                 shape: tuple[int, ...] | None = None,
                 compute_rows: Callable[[int, int, int], np.ndarray] | None = None) -> None:  # fmt: skip
        assert sum(x is not None for x in (array, store, compute)) == 1, "one of array, store, compute"
        assert compute is None or shape is not None, "a computed stage states its shape"
        self.name, self.title, self.formula, self.description = name, title, formula, description
        self._array = array
        self.store = store  # n×n stages: computed per head and block of rows
        self._compute = compute  # stages after the weights: computed whole, once, when first read
        self._shape = shape
        # (head, r0, r1) -> rows r0:r1 of that head's matrix, while the whole is not computed (a long
        # input's head outputs: one query's needs one row of weights, not all n rows)
        self._compute_rows = compute_rows
        self._lock = threading.Lock()
        self.row_labels, self.col_labels = tuple(row_labels), tuple(col_labels)
        self.row_axis, self.col_axis = row_axis, col_axis
        self.per_head = per_head
        self.shapes = shapes  # the formula's operand shapes, per head, e.g. "(6×24)·(24×6) → 6×6"
        # For grouped-query attention: which key/value head each query head reads (len h).
        self.head_groups = head_groups

    def __repr__(self) -> str:
        return f"Stage({self.name!r}, shape={self.shape}, lazy={self.lazy})"

    @property
    def lazy(self) -> bool:
        """True while reading the stage still means computing it."""
        return self.store is not None or self._array is None

    @property
    def shape(self) -> tuple[int, ...]:
        if self.store is not None:
            return (self.store.heads, self.store.n_q, self.store.n_k)
        return tuple(self._array.shape) if self._array is not None else tuple(self._shape)

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype if self._array is not None else np.dtype(np.float32)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    @property
    def array(self) -> np.ndarray:
        """The whole stage. A lazy stage computes every head: prefer :meth:`head` or :meth:`rows`."""
        if self.store is not None:
            return self.store.full(self.name)
        if self._array is None:
            with self._lock:
                if self._array is None:
                    array = self._compute()
                    assert array.shape == tuple(self._shape), (self.name, array.shape, self._shape)
                    self._array = array
        return self._array

    @property
    def streamed(self) -> bool:
        """A long store's weights (models.engine.long_rows): never held, their overview is made from Q, K
        and the rows' statistics a band of rows at a time, streamed to the window."""
        return self.store is not None and getattr(self.store, "long", None) is not None and self.name == "weights"

    @property
    def heads(self) -> int:
        return self.shape[0] if self.per_head else 1

    def head(self, i: int) -> np.ndarray:
        """The 2-D matrix of head ``i`` (or the whole matrix for a non-head stage)."""
        if self.store is not None:
            return self.store.head(self.name, i)
        return self.array[i] if self.per_head else self.array

    def rows(self, i: int, r0: int, r1: int) -> np.ndarray:
        """Rows ``r0:r1`` of head ``i``'s matrix, without computing the others."""
        if self.store is not None:
            return self.store.rows(self.name, i, r0, r1)
        if self._array is None and self._compute_rows is not None:
            r0, r1 = max(0, r0), min(self.shape[-2], r1)
            return self._compute_rows(i, r0, max(r0, r1))
        return self.head(i)[r0:r1]

    def cell(self, i: int, row: int, col: int) -> float:
        return float(self.rows(i, row, row + 1)[0, col])


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

    @property
    def nbytes(self) -> int:
        """What the trace holds now: eager arrays plus the blocks its stores have cached."""
        stores = {id(s.store): s.store for s in self.stages if s.store is not None}
        return sum(s.nbytes for s in self.stages if not s.lazy) + sum(p.cached_bytes for p in stores.values())


def query_row(trace: AttentionTrace, head: int, row: int) -> tuple[np.ndarray, np.ndarray]:
    """One query's weights over the keys ``(n_k,)`` and its head output ``(d_v,)``, without
    computing the other rows: ``o_i = Σ_j a_ij v_j`` from the value rows when the head outputs
    have not been computed yet."""
    weights = trace["weights"]
    a = weights.rows(head, row, row + 1)[0]
    if "head_output" not in trace:
        return a, np.zeros(0, np.float32)
    out = trace["head_output"]
    if not out.lazy:
        return a, out.head(head)[row]
    groups = weights.head_groups
    v = trace["v"].head(groups[head] if groups else head)  # (n_k, d_v)
    keys = a[: v.shape[0]]  # a learned sink's column (last, if any) has no value row
    return a, (keys.astype(np.float64) @ v.astype(np.float64)).astype(np.float32)
