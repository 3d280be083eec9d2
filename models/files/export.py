"""Trace -> one ``<stage>.npy`` per stage + ``manifest.json``, written atomically.

Files go to a temporary folder beside the target and are renamed into place at the end, so an
interrupted export leaves either nothing or the complete folder, never half of it; replacing a
folder (``force``) is allowed only for a previous export and keeps the old one or the new one
whole (models/io/atomic.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.checks import check_block_finite, check_finite_stages, largest_input
from models.config import InputError
from models.engine.trace import AttentionTrace, Stage
from models.io.atomic import MANIFEST, TOOL, atomic_file, atomic_folder, check_target

__all__ = ["MANIFEST", "atomic_folder", "check_target", "manifest", "read_trace_files", "write_array", "write_trace"]


def manifest(trace: AttentionTrace, stages: Sequence[str] | None = None,
             heads: Sequence[int] | None = None) -> dict[str, Any]:  # fmt: skip
    """The JSON description of a trace: tokens, config, device, and each stage written, in order."""
    return {
        "tool": TOOL,
        "format": "attention-explorer-trace/1",
        "query_tokens": list(trace.query_tokens),
        "key_tokens": list(trace.key_tokens),
        "config": trace.config,
        "device": trace.device,
        "torch_version": torch.__version__,
        "elapsed_ms": round(trace.elapsed_ms, 3),
        "meta": trace.meta,
        "stages": [_stage_entry(trace[name], heads, trace.key_tokens) for name in (stages or trace.names)],
    }


def _stage_entry(stage: Stage, heads: Sequence[int] | None = None, keys: Sequence[str] = ()) -> dict[str, Any]:
    entry = {
        "name": stage.name,
        "title": stage.title,
        "formula": stage.formula,
        "file": f"{stage.name}.npy",
        "shape": list(_written_shape(stage, heads)),
        "dtype": str(stage.dtype),
        "axes": (["head"] if stage.per_head else []) + [stage.row_axis, stage.col_axis],
    }
    if stage.per_head:  # which heads the file holds, numbered from 0 as the window's --head and explain
        entry["heads"] = list(_stage_heads(stage, heads))
    if stage.head_groups is not None:
        entry["head_groups"] = list(stage.head_groups)
    if stage.col_axis == "key" and len(stage.col_labels) > len(keys) > 0:  # e.g. gpt-oss's "sink" column, last
        entry["col_labels"] = list(stage.col_labels)
    return entry


def _stage_heads(stage: Stage, heads: Sequence[int] | None) -> list[int]:
    """The 0-based heads of ``stage`` to write: the chosen query heads (for the key/value stages
    of grouped-query attention, the key/value heads they read), or all."""
    if heads is None or not stage.per_head:
        return list(range(stage.heads))
    groups = next((g for g in [stage.head_groups] if g), None)
    if groups is not None and stage.heads < len(groups):  # k, v of GQA: key/value heads
        return sorted({groups[h] for h in heads})
    return list(heads)


Span = tuple[int | None, int | None] | None  # rows (or keys) A:B of a region: None an open end, negative from the end


def _cut(stage: Stage, rows: Span, cols: Span) -> tuple[int, int, int, int]:
    """Rows r0:r1 and columns c0:c1 of ``stage`` to write: ``rows`` cut the rows of every stage
    whose rows are tokens, ``cols`` the columns of those whose columns are the keys (n×n stages).
    A span outside the stage is refused, naming the valid range (it was clipped: ``--rows 9:10`` of
    9 tokens wrote empty arrays)."""
    n_rows, n_cols = stage.shape[-2:]
    tokens = rows is not None and stage.row_axis != "head"
    r0, r1 = _within(rows, n_rows, "--rows", stage, "rows") if tokens else (0, n_rows)
    keyed = stage.col_axis == "key" and cols is not None
    c0, c1 = _within(cols, n_cols, "--cols", stage, "keys") if keyed else (0, n_cols)
    return r0, r1, c0, c1


def _within(span: tuple[int | None, int | None], n: int, option: str, stage: Stage, what: str) -> tuple[int, int]:
    """``span`` as rows (or keys) a:b of the ``n`` a stage has, as a slice reads it (an open end
    is 0 or n, a negative number counts from the end), refused when it is not inside them."""
    a, b = span
    a = 0 if a is None else a + n if a < 0 else a
    b = n if b is None else b + n if b < 0 else b
    if not 0 <= a < b <= n:
        given = ":".join("" if x is None else str(x) for x in span)
        raise InputError(f"{option} {given} is outside the {n} {what} of stage {stage.name!r}: A:B needs "
                         f"0 ≤ A < B ≤ {n} (a negative A or B counts from the end)")  # fmt: skip
    return a, b


def _written_shape(stage: Stage, heads: Sequence[int] | None, rows: Span = None, cols: Span = None) -> tuple[int, ...]:
    r0, r1, c0, c1 = _cut(stage, rows, cols)
    cut = (r1 - r0, c1 - c0) if stage.shape[-2:] != () else ()
    if not stage.per_head:
        return (*stage.shape[:-2], *cut)
    return (len(_stage_heads(stage, heads)), *cut)


def check_size(trace: AttentionTrace, stages: Sequence[str], out: str | os.PathLike, heads: Sequence[int] | None,
               rows: Span = None, cols: Span = None) -> None:  # fmt: skip
    """Refuse, before anything is written, an export larger than the free space where it goes,
    saying the size each large stage would take (an n×n stage at 131,072 tokens: 64 GiB a head)."""
    import shutil

    from models.memory import human

    sizes = {n: 4 * int(np.prod(_written_shape(trace[n], heads, rows, cols), dtype=np.float64)) for n in stages}
    parent = Path(out).expanduser().resolve().parent
    try:
        free = shutil.disk_usage(parent).free
    except OSError:
        return  # the writer reports an unusable folder in its own words
    total = sum(sizes.values())
    if total > free:
        big = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
        named = ", ".join(f"{n} {human(b)}" for n, b in big)
        raise InputError(f"this export would take {human(total)} ({named}) but {parent} has {human(free)} free; "
                         f"nothing was written: {_what_fits(trace, big[0][0], heads, rows, cols, total, free)}")


def _what_fits(trace, largest: str, heads, rows: Span, cols: Span, total: int, free: int) -> str:
    """The advice of a refused export: how many rows of the region asked for would fit (issue 50: with
    --rows given at 131,072 tokens it said "use --rows A:B", not which)."""
    shape = _written_shape(trace[largest], heads, rows, cols)
    count = int(shape[-2]) if len(shape) >= 2 else 0
    r0 = _cut(trace[largest], rows, cols)[0] if count else 0
    fit = int(count * free // total) if count else 0
    if fit < 1:
        return "not even one row of these stages fits: use --stages or --only-heads, or --cols C:D"
    return (f"{fit:,} of these {count:,} rows would fit (e.g. --rows {r0}:{r0 + fit}); or --cols C:D, --stages "
            f"or --only-heads")


def select(trace: AttentionTrace, stages: Sequence[str] | None, heads: Sequence[int] | None) -> None:
    """Check ``--stages`` names and 0-based ``heads`` against the trace; one clear line if wrong."""
    for name in stages or ():
        if name not in trace:
            raise InputError(f"this computation has no stage {name!r}; it has {', '.join(trace.names)}")
    h = max(s.heads for s in trace.stages)
    for head in heads or ():
        if not 0 <= head < h:
            raise InputError(f"--only-heads: head {head} does not exist; the heads are 0..{h - 1} (numbered from 0)")


def save_stage(stage: Stage, path: Path, heads: Sequence[int] | None = None, should_stop=None,
               largest: float | None = None, rows: Span = None, cols: Span = None) -> None:  # fmt: skip
    """Write one stage as ``.npy``. A lazy n×n stage is streamed head by head and block by block
    into the file, so that 16,384² per head never has to be in memory at once; a region of it
    (``rows``, ``cols``) is computed for those cells alone."""
    chosen = _stage_heads(stage, heads)
    if rows is not None or cols is not None:
        _save_region(stage, path, chosen, rows, cols, largest)
        return
    if stage.store is None:
        check_finite_stages([stage])
        array = stage.array
        if stage.per_head and chosen != list(range(stage.heads)):
            array = array[chosen]
        np.save(path, array, allow_pickle=False)
        return
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False,
              "shape": _written_shape(stage, heads)}  # fmt: skip
    with open(path, "wb") as f:  # plain writes, not a memory map: no page of it stays resident
        np.lib.format.write_array_header_2_0(f, header)
        for h in chosen:
            for _start, block in stage.store.iter_blocks(stage.name, h, should_stop, keep=False):
                check_block_finite(stage.name, block, largest)
                f.write(np.ascontiguousarray(block, dtype="<f4").data)


def _save_region(stage: Stage, path: Path, chosen: list[int], rows: Span, cols: Span, largest) -> None:
    r0, r1, c0, c1 = _cut(stage, rows, cols)
    if stage.store is None:
        check_finite_stages([stage])
        array = stage.array[chosen] if stage.per_head else stage.array
        np.save(path, np.ascontiguousarray(array[..., r0:r1, c0:c1]), allow_pickle=False)
        return
    parts = []
    for h in chosen:
        block = stage.store.region(stage.name, h, r0, r1, c0, c1)  # exact: those cells alone
        check_block_finite(stage.name, block, largest)
        parts.append(block)
    np.save(path, np.stack(parts).astype("<f4", copy=False), allow_pickle=False)


def write_trace(trace: AttentionTrace, out: str | os.PathLike, force: bool = False,
                stages: Sequence[str] | None = None, heads: Sequence[int] | None = None,
                rows: Span = None, cols: Span = None) -> Path:  # fmt: skip
    """Write every stage (or ``stages``; per-head ones only for the 0-based ``heads``) and the
    manifest to folder ``out``; return its path.

    ``force`` replaces only a previous export of this tool (see :mod:`models.io.atomic`). A NaN or an
    overflow is never written: the export is refused and nothing is left behind.
    """
    select(trace, stages, heads)
    stages = [n for n in trace.names if stages is None or n in stages]  # in the trace's order
    check_size(trace, stages, out, heads, rows, cols)
    with atomic_folder(out, force) as tmp:
        largest = largest_input(trace.stages)
        for name in stages:
            save_stage(trace[name], tmp / f"{name}.npy", heads, largest=largest, rows=rows, cols=cols)
        doc = manifest(trace, stages, heads)
        if rows is not None or cols is not None:  # each stage's region and its shape as written
            for entry in doc["stages"]:
                stage = trace[entry["name"]]
                entry["region"] = list(_cut(stage, rows, cols))
                entry["shape"] = list(_written_shape(stage, heads, rows, cols))
        text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
        # A name that is not UTF-8 (a folder's bytes) becomes a JSON \udcXX escape, still valid JSON.
        (tmp / MANIFEST).write_text(text + "\n", encoding="utf-8", errors="backslashreplace")
    return Path(out)


def npy_path(path: str | os.PathLike) -> Path:
    """The file :func:`write_array` writes for ``path``: ``.npy`` added when it has another suffix."""
    path = Path(path)
    return path if path.suffix == ".npy" else path.with_name(path.name + ".npy")


def write_array(array: np.ndarray, path: str | os.PathLike) -> Path:
    """Save one matrix to ``path`` (.npy) atomically: a temporary file renamed into place."""
    path = npy_path(path)
    with atomic_file(path, "to") as f:
        np.save(f, array, allow_pickle=False)
    return path


def read_trace_files(folder: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Load an exported folder back: ``(manifest, {stage name: array})``."""
    from models.io import read_json, read_npy

    folder = Path(folder)
    man = read_json(folder / MANIFEST, "manifest")
    stages = man.get("stages")
    if not isinstance(stages, list) or not all(isinstance(s, dict) and isinstance(s.get("name"), str)
                                               and isinstance(s.get("file"), str) for s in stages):  # fmt: skip
        raise InputError(f"{folder / MANIFEST}: 'stages' must list each stage's name and file")
    if any(Path(s["file"]).name != s["file"] for s in stages):
        raise InputError(f"{folder / MANIFEST} names files outside its folder")
    arrays = {s["name"]: read_npy(folder / s["file"], "stage file") for s in stages}
    return man, arrays
