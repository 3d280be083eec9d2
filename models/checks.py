"""Checks on values read from the user: seeds, matrices, config.json entries, finished traces.

Each raises :class:`InputError` with one line naming the value, so that a NaN never reaches a
file or a view and a wrong type in a config file never becomes a traceback.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from models.errors import InputError
from models.limits import RANGES, in_bounds

FLOAT32_MAX = float(np.finfo(np.float32).max)


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for one-line messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not in_bounds("seed", seed):
        low, high = RANGES["seed"]  # models/limits.py
        raise InputError(f"seed must be an integer from {low} to 2**63-1 ({high}), got {short(seed)}")
    return seed


def _first_bad(a: np.ndarray, bad: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    where = f"[{', '.join(map(str, index))}]" if index else ""
    value = a[index].item() if hasattr(a[index], "item") else a[index]
    return f"{value!r}{' at ' + where if where else ''}"


def finite_float32(a: np.ndarray, what: str) -> np.ndarray:
    """``a`` as float32, refusing NaN, ±inf and values beyond float32's range (±3.4e38)."""
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
        raise InputError(f"{what} must hold real numbers, got dtype {a.dtype}")
    bad = ~np.isfinite(a)
    if bad.any():
        raise InputError(f"{what} contains NaN or infinite values ({_first_bad(a, bad)})")
    if a.dtype.itemsize > 4 or np.issubdtype(a.dtype, np.integer):
        big = np.abs(a.astype(np.float64)) > FLOAT32_MAX
        if big.any():
            raise InputError(
                f"{what} holds {_first_bad(a, big)}, beyond float32's range (±3.4e38)"
            )
    return a.astype(np.float32)


def check_finite(trace) -> None:
    """Refuse a trace with NaN or ±inf anywhere (``-inf`` in the masked scores is the mask).

    Such values come from float32 overflowing on huge inputs or weights.
    """
    check_finite_stages(trace.stages)


def largest_input(stages) -> float:
    """The largest |value| of the input stages (what a too-large input is reported with)."""
    return max((float(np.abs(s.array).max(initial=0)) for s in stages
                if s.name in ("input", "query_input")), default=0.0)  # fmt: skip


def check_block_finite(name: str, block: np.ndarray, largest: float | None = None) -> None:
    """One block of rows of a lazily computed stage: refuse NaN and ±inf (−∞ is the mask)."""
    bad = ~np.isfinite(block)
    if name == "masked":
        bad &= block != -np.inf
    if bad.any():
        size = f" (largest |input| {largest:.3g})" if largest is not None else ""
        raise InputError(
            f"stage '{name}' overflows float32 ({_first_bad(block, bad)}): the inputs or weights are "
            f"too large{size}; scale them down"
        )


def check_finite_stages(stages) -> None:
    """:func:`check_finite` for a sequence of :class:`~models.engine.trace.Stage`; lazily computed stages
    are checked block by block as they are written (:func:`check_block_finite`), not here."""
    stages = [s for s in stages if not s.lazy]
    for stage in stages:
        a = stage.array
        if a.size and np.isfinite(a.min()) and np.isfinite(a.max()):  # two reductions, no mask as big as a
            continue
        bad = ~np.isfinite(a)
        if stage.name == "masked":
            bad &= a != -np.inf
        if bad.any():
            raise InputError(
                f"stage '{stage.name}' overflows float32 ({_first_bad(a, bad)}): the inputs or "
                f"weights are too large (largest |input| {largest_input(stages):.3g}); scale them down"
            )


# --- config.json values ------------------------------------------------------------------------


def config_float(cfg: dict, name: str, default: float, *, positive: bool = True) -> float:
    """A finite number (``positive``: > 0) from config.json; a bool or a string is refused."""
    value = cfg.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"config.json: {name} must be a number, got {short(value)}")
    try:
        value = float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise InputError(f"config.json: {name} must be a finite number, got {short(value)}") from None
    if not math.isfinite(value) or (positive and value <= 0):
        kind = "a positive number" if positive else "a finite number"
        raise InputError(f"config.json: {name} must be {kind}, got {short(value)}")
    return value


def config_bool(cfg: dict, name: str, default: bool) -> bool:
    """true/false from config.json; the string "false" (which bool() reads as True) is refused."""
    value = cfg.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InputError(f"config.json: {name} must be true or false, got {short(value)}")
    return value


def config_str(cfg: dict, name: str, default: str) -> str:
    value = cfg.get(name, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InputError(f"config.json: {name} must be a string, got {short(value)}")
    return value


def config_mapping(cfg: dict, name: str) -> dict:
    """An optional JSON object (``rope_scaling``, ``rope_parameters``); absent or null is {}."""
    value = cfg.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"config.json: {name} must be a JSON object, got {short(value)}")
    return value
