"""Training steps of one model: ``checkpoints/step-N/`` subfolders, or a hub cache's step revisions.

Three layouts hold a model's history (docs/induction.md):

- a model folder with ``checkpoints/step-N/`` subfolders, each a complete model folder (what
  ``python main.py train`` writes, and the shipped ``induction`` model);
- a Hugging Face Trainer's ``output_dir`` with ``checkpoint-N`` subfolders, each a model folder;
- a Hugging Face cache repository with several revisions named ``stepN`` (``refs/step1000``, ...,
  as Pythia publishes them), each ref pointing at a snapshot.

Torch-free and offline, like registry.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from models.config import InputError
from models.step_names import STEP_FOLDER, TRAINER_FOLDER


def checkpoint_steps(folder: Path) -> dict[int, Path]:
    """``{step: folder}`` of ``folder/checkpoints/step-N`` subfolders, in step order ({} if none)."""
    root = Path(folder) / "checkpoints"
    try:
        entries = list(root.iterdir())
    except OSError:
        return {}
    found = {int(m.group(1)): p for p in entries if p.is_dir() and (m := STEP_FOLDER.match(p.name))}
    return dict(sorted(found.items()))


def trainer_steps(folder: Path) -> dict[int, Path]:
    """``{step: folder}`` of a Trainer's ``folder/checkpoint-N`` subfolders (each with a config.json)."""
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return {}
    found = {int(m.group(1)): p for p in entries
             if p.is_dir() and (m := TRAINER_FOLDER.match(p.name)) and (p / "config.json").is_file()}  # fmt: skip
    return dict(sorted(found.items()))


def cache_revisions(snapshot: Path) -> dict[int, Path]:
    """For a hub-cache snapshot folder, ``{step: snapshot}`` of its repository's ``refs/stepN``."""
    snapshot = Path(snapshot)
    if snapshot.parent.name != "snapshots":
        return {}
    repo = snapshot.parent.parent
    found = {}
    try:
        refs = list((repo / "refs").iterdir())
    except OSError:
        return {}
    for ref in refs:
        m = STEP_FOLDER.match(ref.name)
        if not m or not ref.is_file():
            continue
        try:
            target = repo / "snapshots" / ref.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if target.is_dir():
            found[int(m.group(1))] = target
    return dict(sorted(found.items()))


def model_steps(folder: Path) -> dict[int, Path]:
    """Every step of the model at ``folder`` (checkpoint subfolders first, else cache revisions)."""
    return checkpoint_steps(folder) or trainer_steps(folder) or cache_revisions(folder)


def parse_step(text: str | int | None, available: list[int], where: str) -> int:
    """``"first"``, ``"last"`` (also None) or a step number that is in ``available``."""
    if not available:
        raise InputError(f"{where} has no training steps (no checkpoints/step-N or checkpoint-N folders, "
                         f"no stepN revisions)")
    spec = "last" if text is None else str(text).strip().lower()
    if spec == "first":
        return available[0]
    if spec == "last":
        return available[-1]
    m = STEP_FOLDER.match(spec) or TRAINER_FOLDER.match(spec) or re.match(r"^(\d+)$", spec)
    if not m:
        raise InputError(f"--step must be a step number, 'first' or 'last', got {text!r}")
    step = int(m.group(1))
    if step not in available:
        near = min(available, key=lambda s: abs(s - step))
        raise InputError(f"{where} has no step {step} (nearest: {near}; {len(available)} steps from "
                         f"{available[0]} to {available[-1]})")  # fmt: skip
    return step


def step_folder(folder: Path, step: str | int | None) -> Path:
    """The model folder of ``step`` of the model at ``folder``; ``folder`` itself when no step is
    asked for (a Trainer's ``output_dir`` without a model of its own: its last checkpoint).
    InputError when the model has no such step."""
    if step is None:
        if (folder / "config.json").exists() or not trainer_steps(folder):
            return folder
        step = "last"
    steps = model_steps(folder)
    return steps[parse_step(step, list(steps), str(folder))]
