"""``export --all-layers``: every layer's weights, the rollout and the head metrics, to a folder.

Written atomically (:func:`models.export.atomic_folder`): ``attention.npy`` (L × h × n × n, filled
layer by layer through a memory map, never held in memory twice), ``rollout.npy`` (L × n × n,
``R_l`` at index l), ``heads.csv`` and ``manifest.json``. Definitions: :mod:`models.survey`.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.format import open_memmap

from .atomic import MANIFEST, TOOL, atomic_folder
from .survey import DEFINITIONS, METRIC_NAMES, METRICS_VERSION, head_metrics, rollout

FORMAT = "attention-explorer-survey/1"
ATTENTION_FILE = "attention.npy"
ROLLOUT_FILE = "rollout.npy"
HEADS_FILE = "heads.csv"


def write_heads_csv(metrics: dict[str, np.ndarray], path: Path) -> None:
    """One row per (layer, head), 0-based, full float precision (``repr``)."""
    layers, heads = metrics[METRIC_NAMES[0]].shape
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["layer", "head", *METRIC_NAMES])
        for layer in range(layers):
            for head in range(heads):
                writer.writerow([layer, head, *(repr(float(metrics[m][layer, head])) for m in METRIC_NAMES)])


def read_heads_csv(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """``heads.csv`` back as {metric: (L, h)}."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    layers = 1 + max(int(r["layer"]) for r in rows)
    heads = 1 + max(int(r["head"]) for r in rows)
    out = {m: np.full((layers, heads), np.nan) for m in METRIC_NAMES}
    for r in rows:
        for m in METRIC_NAMES:
            out[m][int(r["layer"]), int(r["head"])] = float(r[m])
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
        weights = open_memmap(tmp / ATTENTION_FILE, mode="w+", dtype=np.float32, shape=shape)
        enc, weights, notices = model.layer_weights(
            sentence, mask=mask, pad_positions=pad_positions, max_tokens=max_tokens, out=weights
        )
        weights.flush()
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


def export_all_layers(args) -> int:
    """``main.py export --all-layers`` (from models.cli): InputError propagates to its one-line message."""
    from .config import InputError
    from .pretrained import load_model

    if not args.model or not args.sentence:
        raise InputError("--all-layers needs --model and --sentence")
    model = load_model(args.model, device=args.device, step=getattr(args, "step", None))
    out, man = write_all_layers(
        model, args.sentence, args.out, force=args.force, mask=args.mask,
        pad_positions=args.pad_positions, max_tokens=args.max_tokens,
    )  # fmt: skip
    for notice in man["notices"]:
        print(f"note: {notice}", file=sys.stderr)
    L, h = man["num_layers"], man["num_heads"]
    print(f"wrote {L} layers × {h} heads over {len(man['tokens'])} tokens to {out} "
          f"({man['device']}, {man['elapsed_ms']:.1f} ms)")  # fmt: skip
    return 0
