"""``export --all-layers``: every layer's weights, the rollout and the head metrics, to a folder.

Written atomically (:func:`models.files.export.atomic_folder`): ``attention.npy`` (L × h × n × n, written
layer by layer with plain writes, never whole in memory nor written through a memory map),
``rollout.npy`` (L × n × n, ``R_l`` at index l), ``heads.csv`` and ``manifest.json``.
Definitions: :mod:`models.reads.survey`.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.format import dtype_to_descr, write_array_header_2_0

from models.engine.finite import csv_float, csv_number
from models.io.atomic import MANIFEST, SURVEY_FORMAT, TOOL, atomic_folder
from models.reads.survey import DEFINITIONS, METRIC_NAMES, METRICS_VERSION, head_metrics, rollout

FORMAT = SURVEY_FORMAT
ATTENTION_FILE = "attention.npy"
ROLLOUT_FILE = "rollout.npy"
HEADS_FILE = "heads.csv"


class LayerFile:
    """``attention.npy`` (L, h, n, n) float32, written layer by layer with plain writes.

    Never through a memory map: a full disk then kills the process with SIGBUS (exit 135, no
    message, the temporary folder left behind); a plain write raises ENOSPC, one line. Used as the
    ``out`` array of ``layer_weights``: ``layers[l] = weights_l`` writes layer l at its place."""

    def __init__(self, path: Path, shape: tuple[int, ...]) -> None:
        self.shape, self.dtype = shape, np.dtype(np.float32)
        self._layer_bytes = int(np.prod(shape[1:])) * 4
        self._f = open(path, "wb")
        write_array_header_2_0(self._f, {"descr": dtype_to_descr(np.dtype("<f4")), "fortran_order": False,
                                         "shape": shape})  # fmt: skip
        self._start = self._f.tell()
        self._last: tuple[int, np.ndarray] | None = None

    def __setitem__(self, layer: int, value: np.ndarray) -> None:
        array = np.ascontiguousarray(value, dtype="<f4")
        if array.shape != self.shape[1:]:
            raise ValueError(f"layer of shape {array.shape}, expected {self.shape[1:]}")
        self._f.seek(self._start + layer * self._layer_bytes)
        self._f.write(array.data)
        self._last = (layer, array)

    def __getitem__(self, layer: int) -> np.ndarray:
        if self._last is None or self._last[0] != layer:
            raise IndexError("only the layer just written can be read back")
        return self._last[1]

    def __enter__(self) -> LayerFile:
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self._f.flush()
                os.fsync(self._f.fileno())
        finally:
            self._f.close()


def write_heads_csv(metrics: dict[str, np.ndarray], path: Path) -> None:
    """One row per (layer, head), 0-based, full float precision (``repr``); a metric that is not
    defined for a head (NaN: ``previous`` of a one-token sentence, ``self`` of cross-attention) is
    an empty cell, never ``nan`` (models.engine.finite.csv_number)."""
    layers, heads = metrics[METRIC_NAMES[0]].shape
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["layer", "head", *METRIC_NAMES])
        for layer in range(layers):
            for head in range(heads):
                writer.writerow([layer, head, *(csv_number(metrics[m][layer, head]) for m in METRIC_NAMES)])


def read_heads_csv(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """``heads.csv`` back as {metric: (L, h)}."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    layers = 1 + max(int(r["layer"]) for r in rows)
    heads = 1 + max(int(r["head"]) for r in rows)
    out = {m: np.full((layers, heads), np.nan) for m in METRIC_NAMES}
    for r in rows:
        for m in METRIC_NAMES:
            if r.get(m) is not None:  # an older heads.csv (metrics version 1) has no "sink"
                out[m][int(r["layer"]), int(r["head"])] = csv_float(r[m])
    return out


def write_all_layers(
    model,
    sentence: str,
    out: str | os.PathLike,
    force: bool = False,
    mask: str | None = None,
    pad_positions=(),
    max_tokens: int | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Run ``model`` (a PretrainedModel) once over ``sentence`` and write the folder; returns
    ``(folder, manifest)``. Nothing is left behind when anything fails."""
    start = time.perf_counter()
    enc = model.encode(sentence, max_tokens)
    n = len(enc.ids)
    shape = (model.num_layers, model.num_heads, n, n)
    with atomic_folder(out, force) as tmp:
        with LayerFile(tmp / ATTENTION_FILE, shape) as layers:
            enc, _, notices = model.layer_weights(
                sentence, mask=mask, pad_positions=pad_positions, max_tokens=max_tokens, out=layers
            )
        weights = np.load(tmp / ATTENTION_FILE, mmap_mode="r")  # read-only: the file is whole and synced
        metrics = head_metrics(weights)
        np.save(tmp / ROLLOUT_FILE, rollout(weights), allow_pickle=False)
        del weights  # closes the memory map before the folder is renamed
        write_heads_csv(metrics, tmp / HEADS_FILE)
        man = {
            "tool": TOOL,
            "format": FORMAT,
            "model": model.name,
            "model_type": model.model_type,
            "tokens": list(enc.tokens),
            "token_ids": list(enc.ids),
            "mask": model.default_mask if mask is None else mask,
            "pad_positions": [int(p) for p in pad_positions],
            "num_layers": model.num_layers,
            "num_heads": model.num_heads,
            "decoder": model.default_mask == "causal",
            "metrics_version": METRICS_VERSION,
            "definitions": DEFINITIONS,
            "files": {
                ATTENTION_FILE: {"shape": list(shape), "axes": ["layer", "head", "query", "key"]},
                ROLLOUT_FILE: {"shape": [shape[0], n, n], "axes": ["layer", "query", "key"]},
                HEADS_FILE: {"columns": ["layer", "head", *METRIC_NAMES]},
            },
            "device": model.device_label,
            "notices": notices,
            "elapsed_ms": round((time.perf_counter() - start) * 1000, 3),
        }
        text = json.dumps(man, indent=2, ensure_ascii=False, allow_nan=False)
        (tmp / MANIFEST).write_text(text + "\n", encoding="utf-8")
    return Path(out), man
