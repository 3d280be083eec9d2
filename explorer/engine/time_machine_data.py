"""What the Time machine window shows, computed once when it opens (off the GUI thread): the model's
history (every checkpoint's hash, its heads' detector scores and matches, the role events:
models/history/table.py) and one cell's ``why`` at every step (models/history/why_steps.py). Qt-free."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.history.table import History, build_history
from models.history.why_steps import history_of


@dataclass
class TimeMachine:
    history: History
    paths: list[Path]  # each step's model folder
    name: str
    sentence: str
    layer: int
    cell: tuple[int, int, int] | None = None  # (head, query, key) of the why series
    why: dict | None = None  # models.history.why_steps' series
    why_error: str = ""  # why the series could not be made (said in the window)

    @property
    def steps(self) -> list[int]:
        return self.history.steps

    def similarity(self, index: int) -> np.ndarray:
        """(L, h): each head's similarity to the head it was matched to at the previous step (1 at the first)."""
        L, h = self.history.detectors["previous"].shape[1:]
        if index == 0:
            return np.ones((L, h))
        m = self.history.matches[index - 1]
        out = np.full((L, h), np.nan)
        for layer in range(L):
            for i, j in enumerate(m.match[layer]):
                if j >= 0:
                    out[layer, j] = m.score[layer, i]
        return out

    def follows(self, index: int) -> np.ndarray:
        """(L, h): the previous step's head each head was matched to (its own number when not renumbered)."""
        L, h = self.history.detectors["previous"].shape[1:]
        out = np.tile(np.arange(h), (L, 1))
        if index > 0:
            m = self.history.matches[index - 1]
            for layer in range(L):
                for i, j in enumerate(m.match[layer]):
                    if j >= 0:
                        out[layer, j] = i
        return out


def default_cell(model: str, sentence: str, layer: int, head: int = 0) -> tuple[int, int, int]:
    """The last query and the key it weighs most at the model's last step, for ``head``."""
    from models import api

    weights = api.load(model).trace(sentence, layer=layer).stage("weights")  # (h, n, n)
    row = weights.shape[1] - 1
    return head, row, int(np.argmax(weights[head, row]))


def build_time_machine(model: str, sentence: str, layer: int = 0, cell: tuple[int, int, int] | None = None,
                       steps: str = "all") -> TimeMachine:  # fmt: skip
    from models import api
    from models.config import InputError
    from models.history.why_steps import chosen_steps

    root, available = history_of(model)
    chosen = chosen_steps(steps, list(available), root)
    history = build_history(Path(root), {s: available[s] for s in chosen})
    name = "induction" if str(model).strip().lower() == "induction" else Path(root).name
    layer = min(max(0, layer), history.detectors["previous"].shape[1] - 1)
    tm = TimeMachine(history, [Path(available[s]) for s in chosen], name, sentence, layer)
    try:
        last = str(tm.paths[-1])  # a step's folder: the run's own folder may hold no model (a Trainer's)
        tm.cell = cell or default_cell(last, sentence, layer)
        tm.why = api.load(last).trace(sentence, layer=layer).why(*tm.cell, steps=",".join(map(str, chosen)))
    except InputError as exc:
        tm.why_error = str(exc)
    return tm
