"""What a matrix file (``--embeddings``, ``--cross-embeddings``, ``--mask-file``) must be, checked
from its ``.npy`` header before any byte of data is read (issue 36): two axes, at least one row,
no more rows than the token limit (its width is checked against ``d_model`` later, with the
run's sizes), and the memory the run will hold for it (the file's data, its float32 copy and the
embedding lookups) within the budget.
Before, a 2 GiB embeddings file was read whole, then copied twice, before its shape was checked."""

from __future__ import annotations

import math
from collections.abc import Callable

from models.config import DEFAULT_MAX_TOKENS, InputError
from models.limits import in_bounds
from models.memory import F32, check_memory


def matrix_check(what: str, path: str, max_tokens: int | None = None,
                 d_model: int | None = None) -> Callable[[tuple[int, ...]], None]:  # fmt: skip
    """``check(shape)`` for :func:`models.io.read_npy`: one InputError line naming the file. ``d_model``:
    the run's width, which an embeddings matrix's columns must be (None: not known here)."""
    limit = max_tokens if type(max_tokens) is int and in_bounds("max_tokens", max_tokens) else DEFAULT_MAX_TOKENS

    def check(shape: tuple[int, ...]) -> None:
        if len(shape) != 2:
            axes = "n x n" if what == "mask" else "n x d_model"
            raise InputError(f"{what} file {path} must be a 2-D matrix ({axes}), got shape {shape}")
        rows, cols = shape
        if rows == 0:
            raise InputError(f"{what} file {path} has no rows: supply at least one token")
        if rows > limit or what == "mask" and cols > limit:
            raise InputError(f"{what} file {path} has shape {shape}, more than the limit of {limit} tokens")
        if what != "mask" and type(d_model) is int and cols != d_model:
            name = "query embeddings" if what == "cross embeddings" else what  # the engine's words
            raise InputError(f"{name} has {cols} columns but d_model is {d_model} (file {path})")
        check_memory(math.prod(shape) * (8 + 2 * F32), f"{what} file {path} (shape {shape})", hint=wide_hint(shape))

    return check


def wide_hint(shape: tuple[int, ...]) -> str:
    """What to make smaller when a matrix of ``shape`` is too large: its width (d_model) when that is what
    is large, else its rows (tokens)."""
    rows, cols = shape
    if cols > rows:
        return f"its rows are {cols:,} wide (d_model): use a smaller d_model"
    return "use fewer tokens (rows)"
