"""The names of training-step folders and revisions (``step-N``, ``stepN``): no torch, so the
window's widgets can label a step's folder without importing the engine."""

from __future__ import annotations

import re
from pathlib import Path

STEP_FOLDER = re.compile(r"^step-?(\d+)$")
TRAINER_FOLDER = re.compile(r"^checkpoint-(\d+)$")  # Hugging Face Trainer's output_dir/checkpoint-N


def step_of_folder(folder: str | Path) -> tuple[Path, int] | None:
    """``(the run's folder, step)`` for a ``RUN/checkpoints/step-N`` or a Trainer's ``RUN/checkpoint-N``
    folder, else None."""
    p = Path(folder)
    m = STEP_FOLDER.match(p.name)
    if m and p.parent.name == "checkpoints":
        return p.parent.parent, int(m.group(1))
    m = TRAINER_FOLDER.match(p.name)
    return (p.parent, int(m.group(1))) if m else None


def checkpoint_note(model: str | Path) -> str:
    """What to say of a model that is one training step's checkpoint (``RUN/checkpoints/step-N``: the
    training timeline opens these, and the window remembers the model it showed last), else ""."""
    found = step_of_folder(model) if str(model).strip() else None
    if found is None:
        return ""
    run, step = found
    return f"{run.name} at training step {step}: a checkpoint from its training, not the trained model"
