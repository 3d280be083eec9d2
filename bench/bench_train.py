"""Benchmark ``python main.py train``: the whole run's wall time (target <= 5 minutes on 2 cores),
then the shipped model's scores on a block of 30 random characters repeated twice.

    python bench/bench_train.py [--steps N] [--seed S]

It trains into a temporary folder (one torch thread, as the command does) and prints the time,
the final losses, and each head's previous-token and induction scores at the first and last step.
The machine's load is printed too: other processes on the same cores slow the run down.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_S = 300.0


def probe_scores(folder: Path):
    from models.pretrained import load_model
    from models.reads.survey import all_layer_weights
    from models.training.data import repeated_block
    from models.training.scores import head_scores

    tokens, A = all_layer_weights(load_model(folder, device="cpu"), repeated_block())
    return head_scores(A, tokens)


def main() -> int:
    from models.training.train import TrainConfig, train

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=TrainConfig().steps)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        rows = train(Path(tmp), replace(TrainConfig(), steps=args.steps, seed=args.seed))
        elapsed = time.perf_counter() - start
        print(f"train {args.steps} steps: {elapsed:.1f} s (target <= {TARGET_S:.0f} s) "
              f"{'OK' if elapsed <= TARGET_S else 'OVER'}; load average after {os.getloadavg()[0]:.1f}")  # fmt: skip
        last = rows[-1]
        print(f"final held-out loss {last['heldout_loss']:.3f}, on repeated blocks {last['heldout_repeated_loss']:.3f}")
        for name, folder in (("first", Path(tmp) / "checkpoints" / "step-000000"), ("last", Path(tmp))):
            s = probe_scores(folder)
            print(f"{name} step: previous L0 max {s['previous'][0].max():.3f}, induction L1 max "
                  f"{s['induction'][1].max():.3f}, any head {s['induction'].max():.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
