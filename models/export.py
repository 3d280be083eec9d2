"""Trace -> one ``<stage>.npy`` per stage + ``manifest.json``, written atomically.

Files go to a temporary folder beside the target and are renamed into place at the end, so an
interrupted export leaves either nothing or the complete folder, never half of it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import InputError
from .trace import AttentionTrace, Stage

MANIFEST = "manifest.json"


def manifest(trace: AttentionTrace) -> dict[str, Any]:
    """The JSON description of a trace: tokens, config, device, and each stage in order."""
    return {
        "format": "attention-explorer-trace/1",
        "query_tokens": list(trace.query_tokens),
        "key_tokens": list(trace.key_tokens),
        "config": trace.config,
        "device": trace.device,
        "torch_version": torch.__version__,
        "elapsed_ms": round(trace.elapsed_ms, 3),
        "meta": trace.meta,
        "stages": [_stage_entry(s) for s in trace.stages],
    }


def _stage_entry(stage: Stage) -> dict[str, Any]:
    entry = {
        "name": stage.name,
        "title": stage.title,
        "formula": stage.formula,
        "file": f"{stage.name}.npy",
        "shape": list(stage.shape),
        "dtype": str(stage.array.dtype),
        "axes": (["head"] if stage.per_head else []) + [stage.row_axis, stage.col_axis],
    }
    if stage.head_groups is not None:
        entry["head_groups"] = list(stage.head_groups)
    return entry


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


def write_trace(trace: AttentionTrace, out: str | os.PathLike, force: bool = False) -> Path:
    """Write every stage and the manifest to folder ``out``; return its path."""
    out = check_target(out, force)
    parent = out.resolve().parent
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=parent))
    except OSError as exc:
        raise InputError(f"cannot write to {out}: {exc.strerror or exc}") from None
    try:
        for stage in trace.stages:
            np.save(tmp / f"{stage.name}.npy", stage.array, allow_pickle=False)
        text = json.dumps(manifest(trace), indent=2, ensure_ascii=False, allow_nan=False)
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


@contextmanager
def atomic_folder(out: str | os.PathLike, force: bool = False) -> Iterator[Path]:
    """Yield a temporary folder beside ``out`` to write into; renamed to ``out`` when the block
    ends, removed (``out`` untouched) when it raises. The same steps as :func:`write_trace`."""
    out = check_target(out, force)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.resolve().parent))
    except OSError as exc:
        raise InputError(f"cannot write to {out}: {exc.strerror or exc}") from None
    try:
        yield tmp
        _replace(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write to {out}: {exc.strerror or exc}") from None
        raise
