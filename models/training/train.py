"""The training loop: plain torch, one thread, every random number from the seed.

Deterministic for a seed on one torch version: torch runs on one thread (restored afterwards), the
weights come from ``torch.manual_seed(seed)``, the data from numpy generators seeded with
``[seed, k]``, and nothing else is random. So training the first steps again reproduces the first
checkpoints exactly (tests/models/test_training.py does).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch.nn import functional as F

from models.training.checkpoints import save_model, schedule, step_name, write_losses
from models.training.data import VOCAB, Batch, DataConfig, batch, held_out, skip_table, training_stream
from models.training.tiny_llama import TinyConfig, TinyLlama

# Memory a training run takes beyond the command's start: the address space grew by 161 MiB and the
# resident size by 175 MiB over ``main.py train --steps 2`` (torch's optimiser imports most of it;
# the model, its Adam moments and a batch's activations are a few MiB), rounded up. Checked first,
# so that a memory limit is one line before anything is written (issue 36: a MemoryError traceback).
TRAIN_BYTES = 224 << 20

Progress = Callable[[int, int, float], None]  # (step, total steps, training loss)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2500
    seed: int = 0
    batch_size: int = 32
    lr: float = 5e-3
    warmup: int = 50
    checkpoints: int = 40
    model: TinyConfig = field(default_factory=lambda: TinyConfig(vocab_size=len(VOCAB)))
    data: DataConfig = field(default_factory=DataConfig)


def losses(model: TinyLlama, b: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean loss, mean loss over the repeated targets) of one batch."""
    ids = torch.from_numpy(b.ids)
    logits, _ = model(ids[:, :-1])  # (B, T-1, V)
    per = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none")
    per = per.view(ids.shape[0], -1)  # (B, T-1)
    rep = torch.from_numpy(b.repeated)
    return per.mean(), per[rep].mean() if rep.any() else torch.tensor(float("nan"))


def train(out: Path, tc: TrainConfig = TrainConfig(), progress: Progress | None = None,
          stop_after: int | None = None) -> list[dict]:
    """Train and write the run folder's contents into ``out`` (which must exist); return the loss rows.

    ``stop_after``: stop once that step's checkpoint is written (the schedule stays that of
    ``tc.steps``), so a test can redo the first steps of a run.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(Path(out), tc, progress or (lambda s, n, loss: None), stop_after)
    finally:
        torch.set_num_threads(threads)


def _train(out: Path, tc: TrainConfig, progress: Progress, stop_after: int | None) -> list[dict]:
    torch.manual_seed(tc.seed)
    model = TinyLlama(tc.model)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, betas=(0.9, 0.98), weight_decay=0.0)
    rng, table = training_stream(tc.seed), skip_table(tc.seed)
    heldout = held_out(tc.seed, cfg=tc.data)
    saves = set(schedule(tc.steps, tc.checkpoints))
    last = tc.steps if stop_after is None else min(stop_after, tc.steps)
    rows, start = [], time.perf_counter()
    for step in range(last + 1):
        b = batch(rng, tc.batch_size, tc.data, table)
        loss, rep = losses(model, b)  # the weights after `step` updates
        if step in saves:
            with torch.no_grad():
                h_loss, h_rep = losses(model, heldout)
            rows.append({"step": step, "train_loss": loss.item(), "train_repeated_loss": rep.item(),
                         "heldout_loss": h_loss.item(), "heldout_repeated_loss": h_rep.item()})  # fmt: skip
            save_model(out / "checkpoints" / step_name(step), model)
        progress(step, tc.steps, loss.item())
        if step == last:
            break
        for group in opt.param_groups:
            group["lr"] = tc.lr * min(1.0, (step + 1) / tc.warmup)
        opt.zero_grad()
        loss.backward()
        opt.step()
    final = out / "checkpoints" / step_name(rows[-1]["step"])
    for f in final.iterdir():
        shutil.copy2(f, out / f.name)
    write_losses(out / "losses.csv", rows)
    info = {"made_by": "python main.py train", "seconds": round(time.perf_counter() - start, 1),
            "torch": torch.__version__, "config": asdict(tc)}  # fmt: skip
    (out / "training.json").write_text(json.dumps(info, indent=2, default=str) + "\n", encoding="utf-8")
    return rows
