"""Trace -> one ``<stage>.npy`` per stage + ``manifest.json``, written atomically.

Files go to a temporary folder beside the target and are renamed into place at the end, so an
interrupted export leaves either nothing or the complete folder, never half of it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import InputError
from .trace import AttentionTrace, Stage

MANIFEST = "manifest.json"


def manifest(trace: AttentionTrace, stages: Sequence[str] | None = None,
             heads: Sequence[int] | None = None) -> dict[str, Any]:  # fmt: skip
    """The JSON description of a trace: tokens, config, device, and each stage written, in order."""
    return {
        "format": "attention-explorer-trace/1",
        "query_tokens": list(trace.query_tokens),
        "key_tokens": list(trace.key_tokens),
        "config": trace.config,
        "device": trace.device,
        "torch_version": torch.__version__,
        "elapsed_ms": round(trace.elapsed_ms, 3),
        "meta": trace.meta,
        "stages": [_stage_entry(trace[name], heads) for name in (stages or trace.names)],
    }


def _stage_entry(stage: Stage, heads: Sequence[int] | None = None) -> dict[str, Any]:
    entry = {
        "name": stage.name,
        "title": stage.title,
        "formula": stage.formula,
        "file": f"{stage.name}.npy",
        "shape": list(_written_shape(stage, heads)),
        "dtype": str(stage.dtype),
        "axes": (["head"] if stage.per_head else []) + [stage.row_axis, stage.col_axis],
    }
    if stage.per_head:  # which heads the file holds, numbered from 1 as the window's --head
        entry["heads"] = [h + 1 for h in _stage_heads(stage, heads)]
    if stage.head_groups is not None:
        entry["head_groups"] = list(stage.head_groups)
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


def _written_shape(stage: Stage, heads: Sequence[int] | None) -> tuple[int, ...]:
    if not stage.per_head:
        return stage.shape
    return (len(_stage_heads(stage, heads)), *stage.shape[1:])


def select(trace: AttentionTrace, stages: Sequence[str] | None, heads: Sequence[int] | None) -> None:
    """Check ``--stages`` names and 0-based ``heads`` against the trace; one clear line if wrong."""
    for name in stages or ():
        if name not in trace:
            raise InputError(f"this computation has no stage {name!r}; it has {', '.join(trace.names)}")
    h = max(s.heads for s in trace.stages)
    for head in heads or ():
        if not 0 <= head < h:
            raise InputError(f"--only-heads: head {head + 1} does not exist; the heads are 1..{h}")


def save_stage(stage: Stage, path: Path, heads: Sequence[int] | None = None, should_stop=None) -> None:
    """Write one stage as ``.npy``. A lazy n×n stage is streamed head by head and block by block
    into a memory-mapped file, so that 16,384² per head never has to be in memory at once."""
    chosen = _stage_heads(stage, heads)
    if stage.store is None:
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
                f.write(np.ascontiguousarray(block, dtype="<f4").data)


def check_target(out: str | os.PathLike, force: bool = False) -> Path:
    """Refuse a target that is a file, or a non-empty folder unless ``force``."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"output path {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise InputError(f"output folder {out} exists and is not empty (use --force to replace it)")
    if out.is_dir() and Path.cwd().resolve().is_relative_to(out.resolve()):
        raise InputError(f"output folder {out} contains the current folder; choose a new folder")
    parent = out.resolve().parent
    if parent.exists() and not parent.is_dir():
        raise InputError(f"cannot write to {out}: {parent} is a file, not a folder")
    if not parent.is_dir():
        raise InputError(f"cannot write to {out}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"cannot write to {out}: folder {parent} is not writable")
    return out


def write_trace(trace: AttentionTrace, out: str | os.PathLike, force: bool = False,
                stages: Sequence[str] | None = None, heads: Sequence[int] | None = None) -> Path:  # fmt: skip
    """Write every stage (or ``stages``; per-head ones only for the 0-based ``heads``) and the
    manifest to folder ``out``; return its path."""
    out = check_target(out, force)
    parent = out.resolve().parent
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=parent))
    except OSError as exc:
        raise InputError(f"cannot write to {out}: {exc.strerror or exc}") from None
    try:
        select(trace, stages, heads)
        stages = [n for n in trace.names if stages is None or n in stages]  # in the trace's order
        for name in stages:
            save_stage(trace[name], tmp / f"{name}.npy", heads)
        text = json.dumps(manifest(trace, stages, heads), indent=2, ensure_ascii=False, allow_nan=False)
        (tmp / MANIFEST).write_text(text + "\n", encoding="utf-8")
        _replace(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write to {out}: {exc.strerror or exc}") from None
        raise
    return out


def write_array(array: np.ndarray, path: str | os.PathLike) -> Path:
    """Save one matrix to ``path`` (.npy) atomically: a temporary file renamed into place."""
    path = Path(path)
    if path.suffix != ".npy":
        path = path.with_name(path.name + ".npy")
    parent = path.resolve().parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.partial-", suffix=".npy", dir=parent)
    except OSError as exc:
        raise InputError(f"cannot write to {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write to {path}: {exc.strerror or exc}") from None
        raise
    return path


def _replace(tmp: Path, out: Path) -> None:
    """Move the finished ``tmp`` folder to ``out``, replacing an old ``out`` if there is one."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.resolve().parent))
    os.replace(out, old / "previous")
    try:
        os.replace(tmp, out)
    except OSError:
        os.replace(old / "previous", out)  # put the old folder back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def read_trace_files(folder: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Load an exported folder back: ``(manifest, {stage name: array})``."""
    folder = Path(folder)
    man = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    arrays = {s["name"]: np.load(folder / s["file"], allow_pickle=False) for s in man["stages"]}
    return man, arrays
