"""Exact partial sums of an atlas: per head and metric the count, the sum and the sum of squares of
the texts' values, kept exactly, so that any split of a corpus merges to the same bits.

Every finite float64 is an integer multiple of 2^-1074 (the smallest subnormal): a value is kept as
that integer (a Python int, :data:`SCALE` = 2^1074 times the value) and its square as the integer
2^2148 times its exact square. Integer addition is associative and commutative, so sums over any
partition of the texts, merged in any order, are the same integers; the mean and the sample
standard deviation are rounded once, at the end, from the exact rationals (``int / int`` is
correctly rounded in Python): mean = S1 / n, sd = sqrt((n S2 − S1²) / (n (n − 1))). A NaN (a
metric a text does not define) is not counted, as before.

Where each head peaks (the best line per metric) merges exactly too: the largest value, the
smallest line on a tie (the first line when the texts are fed in the corpus's order).

numpy and the standard library; no Qt.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from models.errors import InputError

SHIFT = 1074  # float64 values are integer multiples of 2^-1074
COUNTERS = ("texts", "tokens", "truncated_texts", "skipped_texts", "batches")


def _scaled(x: float) -> int:
    """``x · 2^1074`` exactly, as an int (``x`` finite)."""
    n, d = x.as_integer_ratio()  # d is a power of two, at most 2^1074
    return n << (SHIFT + 1 - d.bit_length())


def encode_int(v: int) -> str:
    """A compact exact text for a big int: ``"<hex>p<shift>"`` = hex << shift (trailing zero bits stripped)."""
    if v == 0:
        return "0p0"
    t = (v & -v).bit_length() - 1
    return f"{v >> t:x}p{t}"


def decode_int(s: object) -> int:
    if not isinstance(s, str) or s.count("p") != 1:
        raise ValueError(f"{s!r} is not an exact sum")
    m, t = s.split("p")
    shift = int(t)
    if not 0 <= shift <= 1 << 16:
        raise ValueError(f"{s!r} is not an exact sum")
    return int(m, 16) << shift


class ExactStats:
    """Count, sum and sum of squares of ``shape`` cells, exact (see the module docstring)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = tuple(shape)
        size = int(np.prod(self.shape))
        self.count = [0] * size
        self.s1 = [0] * size
        self.s2 = [0] * size

    def add(self, x: np.ndarray) -> None:
        """One text's values (``shape``), or many (``(k, *shape)``); NaN and ±inf are left out."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, len(self.count))
        for row in x.tolist():
            for i, v in enumerate(row):
                if math.isfinite(v):
                    s = _scaled(v)
                    self.count[i] += 1
                    self.s1[i] += s
                    self.s2[i] += s * s

    def merge(self, other: ExactStats) -> None:
        if other.shape != self.shape:
            raise InputError(f"cannot merge sums of {other.shape} heads into {self.shape}")
        self.count = [a + b for a, b in zip(self.count, other.count)]
        self.s1 = [a + b for a, b in zip(self.s1, other.s1)]
        self.s2 = [a + b for a, b in zip(self.s2, other.s2)]

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sample sd), each rounded once from the exact sums: NaN where no text gave a
        number, sd NaN below two texts."""
        mean, sd = np.full(len(self.count), np.nan), np.full(len(self.count), np.nan)
        for i, (n, s1, s2) in enumerate(zip(self.count, self.s1, self.s2)):
            if n > 0:
                mean[i] = s1 / (n << SHIFT)
            if n > 1:
                try:
                    sd[i] = math.sqrt((n * s2 - s1 * s1) / ((n * (n - 1)) << (2 * SHIFT)))
                except OverflowError:  # a variance beyond float64 (values near 1e308)
                    sd[i] = math.inf
        return mean.reshape(self.shape), sd.reshape(self.shape)

    def to_json(self) -> dict:
        return {"count": self.count, "sum": [encode_int(v) for v in self.s1],
                "squares": [encode_int(v) for v in self.s2]}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict, shape: tuple[int, ...]) -> ExactStats:
        out = cls(shape)
        count, s1, s2 = data["count"], data["sum"], data["squares"]
        if not (len(count) == len(s1) == len(s2) == len(out.count)):
            raise ValueError(f"sums of {len(count)} cells for {len(out.count)} heads")
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in count):
            raise ValueError("a count is not a whole number")
        out.count, out.s1, out.s2 = list(count), [decode_int(v) for v in s1], [decode_int(v) for v in s2]
        return out


class HeadSums:
    """An atlas's mergeable state: per metric the exact statistics and each head's best line, plus
    counters (texts, tokens, truncated, skipped, batches)."""

    def __init__(self, metrics: Iterable[str], shape: tuple[int, int]) -> None:
        self.metrics, self.shape = tuple(metrics), tuple(shape)
        self.stats = {m: ExactStats(self.shape) for m in self.metrics}
        self.best_value = {m: np.full(self.shape, -np.inf) for m in self.metrics}
        self.best_line = {m: np.full(self.shape, -1, dtype=np.int64) for m in self.metrics}
        self.counters = dict.fromkeys(COUNTERS, 0)

    def add(self, lines: list[int], metrics: dict[str, np.ndarray]) -> None:
        """Texts ``lines`` (in the corpus's order) with ``metrics[m]`` of shape ``(len(lines), L, h)``."""
        for m in self.metrics:
            values = np.asarray(metrics[m], dtype=np.float64)
            self.stats[m].add(values)
            for line, x in zip(lines, values):
                self._better(m, x, np.full(self.shape, line, dtype=np.int64))

    def _better(self, m: str, value: np.ndarray, line: np.ndarray) -> None:
        best, where = self.best_value[m], self.best_line[m]
        ok = np.isfinite(value)
        better = ok & ((value > best) | ((value == best) & (line < where) & (line >= 0)))
        best[better] = value[better]
        where[better] = line[better]

    def merge(self, other: HeadSums) -> None:
        if (other.metrics, other.shape) != (self.metrics, self.shape):
            raise InputError(f"cannot merge the sums of {other.shape} heads into {self.shape}")
        for m in self.metrics:
            self.stats[m].merge(other.stats[m])
            self._better(m, other.best_value[m], other.best_line[m])
        for k in COUNTERS:
            self.counters[k] += other.counters[k]

    def to_json(self) -> dict:
        def values(m: str) -> list:
            return [v if math.isfinite(v) else None for v in self.best_value[m].ravel().tolist()]

        return {"counters": dict(self.counters), "sums": {m: self.stats[m].to_json() for m in self.metrics},
                "best": {m: {"value": values(m), "line": self.best_line[m].ravel().tolist()} for m in self.metrics}}

    @classmethod
    def from_json(cls, data: dict, metrics: Iterable[str], shape: tuple[int, int]) -> HeadSums:
        out = cls(metrics, shape)
        size = shape[0] * shape[1]
        counters = data["counters"]
        for k in COUNTERS:
            v = counters[k]
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{k} is not a whole number")
            out.counters[k] = v
        for m in out.metrics:
            out.stats[m] = ExactStats.from_json(data["sums"][m], shape)
            value, line = data["best"][m]["value"], data["best"][m]["line"]
            if len(value) != size or len(line) != size:
                raise ValueError(f"best lines of {len(line)} cells for {size} heads")
            out.best_value[m] = np.array([-np.inf if v is None else float(v) for v in value]).reshape(shape)
            out.best_line[m] = np.array([int(x) for x in line], dtype=np.int64).reshape(shape)
        return out
