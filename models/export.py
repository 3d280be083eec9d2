"""Trace -> one ``<stage>.npy`` per stage + ``manifest.json``, written atomically.

Files go to a temporary folder beside the target and are renamed into place at the end, so an
interrupted export leaves either nothing or the complete folder, never half of it; replacing a
folder (``force``) is allowed only for a previous export and keeps the old one or the new one
whole (models/atomic.py).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .atomic import MANIFEST, TOOL, atomic_folder, check_target, umask
from .checks import check_finite
from .config import InputError
from .trace import AttentionTrace, Stage

__all__ = ["MANIFEST", "check_target", "manifest", "read_trace_files", "write_array", "write_trace"]


def manifest(trace: AttentionTrace) -> dict[str, Any]:
    """The JSON description of a trace: tokens, config, device, and each stage in order."""
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


def write_trace(trace: AttentionTrace, out: str | os.PathLike, force: bool = False) -> Path:
    """Write every stage and the manifest to folder ``out``; return its path.

    ``force`` replaces only a previous export of this tool (see :mod:`models.atomic`).
    """
    check_finite(trace)  # a NaN is never written to a file
    with atomic_folder(out, force) as tmp:
        for stage in trace.stages:
            np.save(tmp / f"{stage.name}.npy", stage.array, allow_pickle=False)
        text = json.dumps(manifest(trace), indent=2, ensure_ascii=False, allow_nan=False)
        # A name that is not UTF-8 (a folder's bytes) becomes a JSON \udcXX escape, still valid JSON.
        (tmp / MANIFEST).write_text(text + "\n", encoding="utf-8", errors="backslashreplace")
    return Path(out)


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
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; a file should follow the umask
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write to {path}: {exc.strerror or exc}") from None
        raise
    return path


def read_trace_files(folder: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Load an exported folder back: ``(manifest, {stage name: array})``."""
    folder = Path(folder)
    man = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    arrays = {s["name"]: np.load(folder / s["file"], allow_pickle=False) for s in man["stages"]}
    return man, arrays
