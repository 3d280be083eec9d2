"""A training run's folder: the final model at the top, ``checkpoints/step-NNNNNN/`` below it.

Layout (each ``step-N`` folder is a complete Hugging Face model folder, as the top is)::

    run/config.json, model.safetensors, tokenizer.json, tokenizer_config.json   (the last step)
    run/losses.csv          step, train_loss, train_repeated_loss, heldout_loss, heldout_repeated_loss
    run/training.json       how it was made (seed, steps, sizes, torch version)
    run/checkpoints/step-000000/ ... step-001500/

Steps are spaced logarithmically (:func:`schedule`), as Pythia's early checkpoints are.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.torch import save_file

from models.config import InputError
from models.pretrained.steps import checkpoint_steps, parse_step  # noqa: F401 (re-exported)
from models.training.tiny_llama import TinyLlama
from models.training.tokenizer_file import write_tokenizer

LOSS_COLUMNS = ("step", "train_loss", "train_repeated_loss", "heldout_loss", "heldout_repeated_loss")


def schedule(steps: int, count: int = 40) -> list[int]:
    """About ``count`` steps from 0 to ``steps``, spaced logarithmically (0 and ``steps`` included)."""
    if steps <= count:
        return list(range(steps + 1))
    points = count
    while True:
        found = sorted({0, *np.unique(np.round(np.geomspace(1, steps, points)).astype(int)).tolist()})
        if len(found) >= count:
            return found
        points += 1


def step_name(step: int) -> str:
    return f"step-{step:06d}"


def save_model(folder: Path, model: TinyLlama) -> None:
    """config.json, model.safetensors and the tokenizer: a folder transformers and the explorer open."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(model.cfg.to_hf(), indent=2) + "\n", encoding="utf-8")
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    try:
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    except SafetensorError as exc:  # a full disk was a SafetensorError traceback (issue 36)
        raise _os_error(exc) from None
    write_tokenizer(folder)


def _os_error(exc: Exception) -> OSError:
    """safetensors' write error as the OSError it wraps ("… I/O error: No space left on device (os
    error 28) …"), so the atomic writer reports it as one line and removes its temporary."""
    found = re.search(r"I/O error: (.*?) \(os error (\d+)\)", str(exc))
    if found:
        return OSError(int(found.group(2)), found.group(1))
    return OSError(f"cannot write the checkpoint: {' '.join(str(exc).split())}")


def write_losses(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=LOSS_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (row[k] if k == "step" else f"{row[k]:.6f}") for k in LOSS_COLUMNS})


def read_losses(path: Path) -> list[dict]:
    """losses.csv as dicts of floats (step an int); [] when there is none."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        return [{k: int(r[k]) if k == "step" else float(r[k]) for k in LOSS_COLUMNS} for r in rows]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"could not read {path}: {e}") from e
