"""The per-step table of a history (``main.py timeline``): each checkpoint's content hash and loss,
and every head's metrics, detector scores and match to the previous step, as ``steps.csv``, with the
events (``events.csv``) and a ``manifest.json``.

One row per (step, layer, head). Columns: ``step``, ``hash``, ``same_weights_as`` (the first step
holding identical weights, empty when none), the losses the history recorded at that step (the
shipped model's ``losses.csv``, or a Trainer's ``trainer_state.json``), ``layer``, ``head``, ``follows``
(the head of the previous step this one was matched to, models/history/heads.py), ``similarity``
(that match's similarity), the detector scores (on the probes), and with a corpus the metrics' means
over it (models/reads/atlas.py, one pass per step).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.config import InputError
from models.engine.finite import csv_number
from models.history.events import Event, role_events
from models.history.heads import HeadMatch, HeadSignatures, head_signatures, match_heads
from models.history.integrity import Integrity, check_history
from models.io.atomic import MANIFEST, TOOL, atomic_folder
from models.reads.detectors import DETECTORS
from models.reads.survey import METRIC_NAMES

FORMAT = "attention-explorer-timeline/1"
SAME_STEP_BONUS = 0.01  # consecutive checkpoints: a head keeps its number unless another fits clearly better


@dataclass
class History:
    folder: Path
    steps: list[int]
    integrity: Integrity
    losses: dict[int, dict[str, float]]  # step -> loss column -> value
    detectors: dict[str, np.ndarray]  # name -> (S, L, h)
    metrics: dict[str, np.ndarray] = field(default_factory=dict)  # name_mean -> (S, L, h), with a corpus
    matches: list[HeadMatch] = field(default_factory=list)  # step s -> s + 1
    events: list[Event] = field(default_factory=list)


def recorded_losses(folder: Path, steps: dict[int, Path]) -> dict[int, dict[str, float]]:
    """``losses.csv`` (``main.py train``) or the newest checkpoint's ``trainer_state.json`` ``log_history``."""
    from models.training.checkpoints import read_losses

    out: dict[int, dict[str, float]] = {}
    if (folder / "losses.csv").is_file():
        for row in read_losses(folder / "losses.csv"):
            out[int(row["step"])] = {k: float(v) for k, v in row.items() if k != "step"}
        return out
    for path in reversed(list(steps.values())):
        state = Path(path) / "trainer_state.json"
        if state.is_file():
            from models.io import read_json

            for entry in read_json(state, "trainer state").get("log_history", []):
                if isinstance(entry, dict) and isinstance(entry.get("step"), int):
                    values = {k: float(v) for k, v in entry.items()
                              if "loss" in k and isinstance(v, (int, float)) and not isinstance(v, bool)}  # fmt: skip
                    if values:
                        out.setdefault(entry["step"], {}).update(values)
            break
    return out


def build_history(folder: Path, steps: dict[int, Path], corpus: str | None = None, limit: int | None = None,
                  device: str = "cpu", progress: Callable[[str, int, int], None] | None = None,
                  on_integrity: Callable[[Integrity], None] | None = None) -> History:  # fmt: skip
    """Hash every checkpoint (``on_integrity`` hears about broken histories before anything runs),
    then run the probes (and the corpus) at every step and match each step's heads to the last's."""
    from models.pretrained import load_model
    from models.reads.atlas import compute_atlas, corpus_lines

    integrity = check_history(steps, progress=None if progress is None else (lambda i, n: progress("hash", i, n)))
    if on_integrity is not None:
        on_integrity(integrity)
    signatures: list[HeadSignatures] = []
    metrics: dict[str, list[np.ndarray]] = {}
    for i, (step, path) in enumerate(steps.items()):
        try:
            model = load_model(path, device=device)
            signatures.append(head_signatures(model))
            if corpus is not None:
                atlas = compute_atlas(model, corpus_lines(corpus), limit=limit, detectors=False)
                for m in METRIC_NAMES:
                    metrics.setdefault(f"{m}_mean", []).append(atlas.columns[f"{m}_mean"])
        except InputError as exc:
            raise InputError(f"the checkpoint of step {step} ({path}): {exc}") from None
        if progress:
            progress("steps", i + 1, len(steps))
    if len({s.shape for s in signatures}) > 1:
        raise InputError("the checkpoints of this history have different numbers of layers or heads")
    matches = [match_heads(a, b, same_bonus=SAME_STEP_BONUS) for a, b in zip(signatures, signatures[1:])]
    detectors = {d: np.stack([s.detectors[d] for s in signatures]) for d in DETECTORS}
    losses = recorded_losses(folder, steps)
    name = _loss_name(losses)
    events = role_events(list(steps), detectors, {s: v[name] for s, v in losses.items() if name in v}, loss_name=name)
    return History(folder, list(steps), integrity, losses, detectors,
                   {k: np.stack(v) for k, v in metrics.items()}, matches, events)  # fmt: skip


LOSS_PREFERENCE = ("heldout_repeated_loss", "heldout_loss", "eval_loss", "train_loss", "loss")


def _loss_name(losses: dict[int, dict[str, float]]) -> str:
    """The loss the events quote: the held-out one on repeated text where the history has it (the
    loss an induction head lowers), else the first of :data:`LOSS_PREFERENCE` it recorded."""
    recorded = {k for v in losses.values() for k in v}
    return next((k for k in LOSS_PREFERENCE if k in recorded), "loss")


def write_history(history: History, out: str | Path, force: bool = False, source: dict | None = None) -> Path:
    loss_cols = sorted({k for v in history.losses.values() for k in v})
    metric_cols = list(history.metrics)
    columns = ["step", "hash", "same_weights_as", *loss_cols, "layer", "head", "follows", "similarity",
               *DETECTORS, *metric_cols]  # fmt: skip
    S, L, h = history.detectors[DETECTORS[0]].shape
    with atomic_folder(out, force) as tmp:
        with open(tmp / "steps.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(columns)
            for s, step in enumerate(history.steps):
                same = history.integrity.duplicate_of(step)
                losses = history.losses.get(step, {})
                for layer in range(L):
                    for head in range(h):
                        follows, sim = ("", "")
                        if s > 0:
                            prev = history.matches[s - 1]
                            back = np.nonzero(prev.match[layer] == head)[0]
                            if back.size:
                                follows, sim = int(back[0]), csv_number(prev.score[layer, back[0]])
                        w.writerow([step, history.integrity.hashes[step], "" if same is None else same,
                                    *(csv_number(losses[c]) if c in losses else "" for c in loss_cols),
                                    layer, head, follows, sim,
                                    *(csv_number(history.detectors[d][s, layer, head]) for d in DETECTORS),
                                    *(csv_number(history.metrics[m][s, layer, head])
                                      for m in metric_cols)])  # fmt: skip
        with open(tmp / "events.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["layer", "head", "role", "becomes", "step_before", "step_after", "before", "after", "text"])
            for e in history.events:
                w.writerow([e.layer, e.head, e.role, int(e.becomes), e.step_before, e.step_after,
                            csv_number(e.before), csv_number(e.after), e.text()])  # fmt: skip
        man = {"tool": TOOL, "format": FORMAT, "history": str(history.folder), "steps": history.steps,
               "broken": history.integrity.message() or None, "source": source, "columns": columns,
               "stages": [{"file": "steps.csv"}, {"file": "events.csv"}]}  # fmt: skip
        (tmp / MANIFEST).write_text(json.dumps(man, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Path(out)
