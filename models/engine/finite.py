"""No NaN on any path: the checks that refuse a non-finite n×n stage, naming the stage, the layer and
the cause, and the bound that says when the scores of a layer cannot overflow at all (then no block
is scanned)."""

from __future__ import annotations

import math

import numpy as np
import torch

from models.engine.host import to_numpy
from models.errors import InputError

FLOAT32_MAX = float(np.finfo(np.float32).max)


def may_overflow(spec) -> bool:  # spec: a models.engine.pairs.PairSpec (pairs imports this module)
    """False when no score can leave float32's range: ``|q_i · k_j| ≤ max‖q‖ · max‖k‖`` (Cauchy–
    Schwarz; every partial sum too) below float32's maximum, and nothing later can make a NaN
    (the scale is at most 1 or checked, the soft cap is bounded, the softmax is exact for any
    finite scores). General and additive scores (the toy engine's) are always checked."""
    if spec.score != "dot":
        return True
    # float32 norms (no float64 copy of Q and K): a norm that is itself infinite counts as "may".
    q = float(torch.linalg.vector_norm(spec.q, dim=-1).max()) if spec.q.numel() else 0.0
    k = float(torch.linalg.vector_norm(spec.k, dim=-1).max()) if spec.k.numel() else 0.0
    bound = q * k  # in Python's float64
    if spec.scale is not None:
        kind, value = spec.scale
        bound = max(bound, bound / value if kind == "div" else bound * value)
    edits = max((abs(v) for v in (spec.score_edits or {}).values()), default=0.0)
    return not (math.isfinite(bound) and max(bound, edits) < FLOAT32_MAX / 2)


def check_pair_block(spec, name: str, head: int, r0: int, block: torch.Tensor, c0: int = 0) -> None:
    """Refuse a block of an n×n stage holding NaN or ±∞ (−∞ in "masked" is the mask), naming
    the stage, the layer and the cause: the queries and keys whose dot products overflow. Looked at
    where the block is (the trace's device): only the cell named crosses to the host. ``c0``: the block's
    first key (a tile of a streamed pass)."""
    bad = ~torch.isfinite(block)
    if name == "masked":
        bad &= block != float("-inf")
    if not bool(bad.any()):
        return
    i, j = (int(x) for x in bad.nonzero()[0])
    where = f" of {spec.label}" if spec.label else ""
    q = float(spec.q.abs().max()) if spec.q.numel() else 0.0
    k = float(spec.k.abs().max()) if spec.k.numel() else 0.0
    sizes = f"largest |input| {spec.largest_input:.3g}, " if spec.largest_input is not None else ""
    raise InputError(
        f"stage '{name}'{where} overflows float32 ({float(block[i, j])!r} at [{head}, {r0 + i}, {c0 + j}]): the "
        f"queries and keys are too large for their dot products ({sizes}largest |q| {q:.3g}, |k| {k:.3g}); scale the "
        f"inputs or weights down"
    )


def all_finite(tensor: torch.Tensor, masked: bool = False) -> bool:
    """No NaN or ±∞ in ``tensor`` (−∞ allowed when ``masked``), from one reduction: its smallest and
    largest value (NaN propagates to both). ~15× quicker than ``isfinite(...).any()``, which makes a
    mask as big as the tensor: the survey checks every n×n stage of every layer."""
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return True
    lo, hi = (float(x) for x in torch.aminmax(tensor))
    if masked:
        return not (math.isnan(lo) or math.isnan(hi) or hi == math.inf)
    return math.isfinite(lo) and math.isfinite(hi)


def check_recorded(record: dict, label: str) -> None:
    """The stages one attention layer recorded (``{name: tensor}``, in the order computed), for a
    path that does not go through the pair store (``export --all-layers``, the survey): the first
    one holding NaN or ±∞ (−∞ in "masked" is the mask) is refused, naming it and ``label``."""
    for name, tensor in record.items():
        if all_finite(tensor, masked=name == "masked"):
            continue
        bad = ~torch.isfinite(tensor)
        if name == "masked":
            bad &= tensor != float("-inf")
        if not bool(bad.any()):
            continue
        index = [int(i) for i in bad.nonzero()[0]]
        value = float(tensor[tuple(index)])
        cause = "the queries and keys are too large for their dot products" if name in (
            "scores", "scaled", "softcapped", "masked", "weights") else "the inputs or weights are too large"
        raise InputError(f"stage '{name}' of {label} overflows float32 ({value!r} at {index}): {cause}; "
                         f"scale them down")  # fmt: skip


# --- the one gate for a result: refused by name, or a documented value in a table ------------------


def refuse_nonfinite(array, what: str, cause: str, axes: tuple[str, ...] = ()) -> None:
    """Refuse ``array`` (numpy or torch) when it holds NaN or ±∞: one InputError line naming
    ``what``, the first bad value and where it is (``axes`` name the indices), and ``cause``."""
    a = to_numpy(array) if isinstance(array, torch.Tensor) else np.asarray(array)
    if not np.issubdtype(a.dtype, np.floating) or a.size == 0:
        return
    if np.isfinite(a.min()) and np.isfinite(a.max()):  # one pass each, no mask as big as the array
        return
    index = [int(i) for i in np.argwhere(~np.isfinite(a))[0]]
    where = ", ".join(f"{n} {i}" for n, i in zip(axes, index)) if axes else str(index)
    raise InputError(f"{what} overflows float32 ({float(a[tuple(index)])!r} at {where}): {cause}; scale them down")


UNDEFINED = ""  # a table's cell for a value that is not defined (docs/formats.md), never "nan"


def csv_number(value: float) -> str:
    """A table's cell: the value in full precision (``repr``), or :data:`UNDEFINED` when it is not
    a finite number (a metric without meaning for this head: ``previous`` of a one-token sentence,
    ``self`` of cross-attention)."""
    value = float(value)
    return repr(value) if math.isfinite(value) else UNDEFINED


def csv_float(text: str) -> float:
    """A table's cell back: NaN for :data:`UNDEFINED` (and for the ``nan`` older files hold)."""
    return math.nan if text.strip() == UNDEFINED else float(text)
