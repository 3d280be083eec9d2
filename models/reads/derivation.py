"""A derivation: how one traced cell is computed, as plain data (see models/reads/explain.py).

Numpy only, so that views can format a derivation without importing the engine.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LARGEST = 6  # terms listed one by one in text(); the rest are summed


@dataclass
class Term:
    """One summand (or one bar): what it is, its value and, for a product, its factors."""

    label: str
    value: float
    factors: tuple[float, ...] = ()

    def describe(self) -> str:
        if len(self.factors) >= 2:
            return f"{self.label} = {' × '.join(num(f) for f in self.factors)} = {num(self.value)}"
        return f"{self.label} = {num(self.value)}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"label": self.label, "value": json_number(self.value)}
        if self.factors:
            d["factors"] = [json_number(f) for f in self.factors]
        return d


@dataclass
class Derivation:
    """How one cell of one stage is computed. Plain data: JSON-able with :meth:`to_json`."""

    stage: str
    cell: tuple[int, ...]  # the index into the stage's array (3 numbers per-head, else 2)
    title: str  # e.g. "Score · head 0 · query 'cat' (1) → key 'sat' (2)"
    formula: str  # the formula with the numbers filled in
    value: float  # == trace[stage].array[cell]
    sum_of: list[Term] | None = None  # every summand in order, bias included; None if not a sum
    steps: list[str] = field(default_factory=list)  # further lines of explanation
    details: dict[str, Any] = field(default_factory=dict)  # stage-specific numbers (JSON-safe)
    bars: list[Term] | None = None  # what a chart shows: the summands, the exponentials, a row
    bars_caption: str = ""
    focus_bar: int | None = None  # the bar that is this cell itself (a weight's key, a row's column)
    bar_ticks: list[str] | None = None  # short tick labels for the bars (key tokens), when they have them

    def largest(self, k: int = LARGEST) -> tuple[list[Term], float, int]:
        """The ``k`` bars of largest magnitude (in their order), the sum and count of the rest."""
        terms = self.bars or []
        if len(terms) <= k + 1:
            return list(terms), 0.0, 0
        order = sorted(range(len(terms)), key=lambda i: -abs(terms[i].value) if math.isfinite(terms[i].value) else 0)
        keep = sorted(order[:k])
        rest = [terms[i].value for i in order[k:]]
        return [terms[i] for i in keep], float(np.sum(rest, dtype=np.float64)), len(rest)

    def total(self) -> float | None:
        """The float64 sum of :attr:`sum_of` (None when the cell is not a sum)."""
        return None if self.sum_of is None else float(np.sum([t.value for t in self.sum_of], dtype=np.float64))

    # --- renderings --------------------------------------------------------------------------------
    def text(self) -> str:
        lines = [self.title, "", "  " + self.formula, ""]
        lines += ["  " + s for s in self.steps]
        if self.bars:
            shown, rest, count = self.largest()
            caption = self.bars_caption or "terms"
            head = f"  {caption}" + (f" (the {len(shown)} largest of {len(self.bars)}):" if count else ":")
            lines += ["", head]
            lines += ["    " + t.describe() for t in shown]
            if count:
                lines.append(f"    … and {count} more, together {num(rest)}")
        if self.sum_of is not None:
            lines += ["", f"  sum of {len(self.sum_of)} terms = {num(self.total(), 8)}"]
        lines += ["", f"  value = {num(self.value, 8)}"]
        return "\n".join(lines).rstrip() + "\n"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "stage": self.stage,
            "cell": list(self.cell),
            "title": self.title,
            "formula": self.formula,
            "value": json_number(self.value),
        }
        if self.sum_of is not None:
            d["sum_of"] = [t.to_dict() for t in self.sum_of]
        d["steps"] = list(self.steps)
        d.update(json_safe(self.details))
        return d

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, allow_nan=False)


# --- numbers ------------------------------------------------------------------------------------


def num(x: float, digits: int = 4) -> str:
    """A number for people: 4 significant digits, a real minus sign, ∞ for infinities."""
    if x is None:
        return "—"
    x = float(x)
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    if math.isnan(x):
        return "NaN"
    text = f"{x:.{digits}g}"
    return text.replace("-", "−")


def json_number(x: float) -> float | str:
    """A float for JSON; infinities and NaN (not standard JSON) as the strings "-inf", "inf", "nan"."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("-inf" if x < 0 else "inf")


def json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return json_number(obj)
    return obj


