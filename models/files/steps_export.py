"""``main.py export --model M --all-steps --sentence ... --out DIR``: every head's scores at every step.

Writes, atomically (:func:`models.io.atomic.atomic_folder`):

- ``steps.csv``: step, layer, head, previous, induction, then the six metrics of models/reads/survey.py
  (entropy, max_weight, self, previous, first, distance: ``previous`` is the same number twice,
  once beside ``induction`` as the two scores of the story, once among the metrics), on the sentence;
- ``losses.csv``: step, loss, repeated_loss (held-out losses of the training run, when the model
  folder has the losses.csv that ``main.py train`` writes; only the header otherwise);
- ``manifest.json``.

The induction score is defined in models/training/scores.py.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

from models.config import InputError
from models.io.atomic import MANIFEST, TOOL, atomic_folder
from models.reads.survey import DEFINITIONS, METRIC_NAMES, METRICS_VERSION

FORMAT = "attention-explorer-steps/1"
STEP_COLUMNS = ("step", "layer", "head", "previous", "induction", *(f"metric_{m}" for m in METRIC_NAMES))


def step_rows(model, sentence: str, step: int, max_tokens: int | None = None) -> tuple[list[str], list[dict]]:
    """The tokens and one row per (layer, head) of ``model`` (a PretrainedModel) at ``step``."""
    from models.reads.survey import all_layer_weights
    from models.training.scores import head_scores

    tokens, A = all_layer_weights(model, sentence, max_tokens=max_tokens)
    scores = head_scores(A, tokens)
    rows = []
    for layer in range(A.shape[0]):
        for head in range(A.shape[1]):
            row = {"step": step, "layer": layer, "head": head, "previous": scores["previous"][layer, head],
                   "induction": scores["induction"][layer, head]}  # fmt: skip
            row.update({f"metric_{m}": scores[m][layer, head] for m in METRIC_NAMES})
            rows.append(row)
    return tokens, rows


def _progress(done: int, total: int, start: float) -> None:
    width = 24
    filled = int(width * done / total)
    print(f"\rsteps [{'#' * filled}{'.' * (width - filled)}] {done}/{total}  {time.perf_counter() - start:.0f} s ",
          end="" if done < total else "\n", file=sys.stderr, flush=True)  # fmt: skip


def _write_csv(path: Path, columns, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([row[c] if isinstance(row[c], (int, str)) else f"{float(row[c]):.6g}" for c in columns])


def export_all_steps(args) -> int:
    """The command (from models.cli.export); InputError propagates to its one-line message."""
    from models.io.text_file import whole_model_text
    from models.pretrained import load_model
    from models.pretrained.registry import resolve_model
    from models.pretrained.steps import model_steps
    from models.training.checkpoints import read_losses

    sentence = whole_model_text(args, "--all-steps")
    if getattr(args, "step", None) is not None:
        raise InputError("--all-steps writes every step; leave out --step")
    folder = resolve_model(args.model)
    steps = model_steps(folder)
    if not steps:
        raise InputError(f"{folder} has no training steps (no checkpoints/step-N folders, no stepN revisions)")
    losses = read_losses(folder / "losses.csv")
    start = time.perf_counter()
    with atomic_folder(args.out, args.force) as tmp:
        rows, tokens = [], []
        for i, (step, path) in enumerate(steps.items()):
            model = load_model(path, device=args.device)
            tokens, more = step_rows(model, sentence, step, args.max_tokens)
            rows += more
            _progress(i + 1, len(steps), start)
        _write_csv(tmp / "steps.csv", STEP_COLUMNS, rows)
        loss_rows = [{"step": r["step"], "loss": r["heldout_loss"], "repeated_loss": r["heldout_repeated_loss"]}
                     for r in losses]  # fmt: skip
        _write_csv(tmp / "losses.csv", ("step", "loss", "repeated_loss"), loss_rows)
        man = {"tool": TOOL, "format": FORMAT, "model": args.model, "steps": list(steps), "tokens": tokens,
               "metrics_version": METRICS_VERSION, "definitions": DEFINITIONS,
               "stages": [{"file": "steps.csv"}, {"file": "losses.csv"}]}  # fmt: skip
        (tmp / MANIFEST).write_text(json.dumps(man, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if not losses:
        print("note: the model has no losses.csv; losses.csv holds only its header", file=sys.stderr)
    print(f"wrote {len(steps)} steps × {len(rows) // len(steps)} heads to {args.out}")
    return 0
