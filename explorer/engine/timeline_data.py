"""What the training timeline shows, computed once when it opens: for every training step of a
model, every head's scores on one sentence, and the run's losses. Qt-free.

Loading each checkpoint of the shipped model and tracing a sentence takes a few ms, so the whole
table (~40 steps) is built in a second or two; the slider then only reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.config import InputError
from models.pretrained import load_model
from models.pretrained.registry import resolve_model
from models.pretrained.steps import model_steps
from models.reads.survey import METRIC_NAMES, all_layer_weights
from models.step_names import step_of_folder
from models.training.checkpoints import read_losses
from models.training.scores import head_scores

SCORES = ("previous", "induction", *(m for m in METRIC_NAMES if m != "previous"))


@dataclass
class Timeline:
    folder: Path  # the model with the history
    name: str
    steps: list[int]
    paths: list[Path]  # each step's model folder
    tokens: list[str]
    scores: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (S, L, h)
    losses: list[dict] = field(default_factory=list)  # models/training/checkpoints.py LOSS_COLUMNS

    @property
    def num_layers(self) -> int:
        return self.scores["previous"].shape[1]

    @property
    def num_heads(self) -> int:
        return self.scores["previous"].shape[2]

    def index_of(self, step: int) -> int:
        return self.steps.index(step)

    def loss_series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(step indexes, values) of one loss column, at the steps the timeline has."""
        pairs = [(self.steps.index(r["step"]), r[key]) for r in self.losses if r["step"] in self.steps]
        return np.array([p[0] for p in pairs], dtype=float), np.array([p[1] for p in pairs], dtype=float)


def history_folder(model: str) -> Path:
    """The folder holding the history of ``model`` (a name, a folder, or one of its step folders)."""
    folder = resolve_model(model)
    found = step_of_folder(folder)
    return found[0] if found else folder


def build_timeline(model: str, sentence: str, progress: Callable[[int, int], None] | None = None,
                   max_tokens: int | None = None, history: bool = True) -> Timeline:  # fmt: skip
    """``history``: a step folder (checkpoints/step-N) stands for the run it belongs to."""
    folder = history_folder(model) if history else resolve_model(model)
    steps = model_steps(folder)
    if not steps:
        raise InputError(f"{folder.name} has no training steps (no checkpoints/step-N folders, no stepN revisions)")
    per_step, tokens = [], []
    for i, (step, path) in enumerate(steps.items()):
        try:
            tokens, A = all_layer_weights(load_model(path, device="cpu"), sentence, max_tokens=max_tokens)
        except InputError as exc:  # which of the checkpoints (issue 36: the line did not say)
            raise InputError(f"the checkpoint of step {step} ({path}): {exc}") from None
        per_step.append(head_scores(A, tokens))
        if progress:
            progress(i + 1, len(steps))
    scores = {name: np.stack([s[name] for s in per_step]) for name in SCORES}
    name = "induction" if str(model).strip().lower() == "induction" else folder.name
    return Timeline(folder, name, list(steps), list(steps.values()), tokens, scores, read_losses(folder / "losses.csv"))
