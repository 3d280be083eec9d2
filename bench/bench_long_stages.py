"""Every n×n stage of a long input drawn as the window draws it (issue 50, point 1): the weights stream
from tiles (models.engine.long_rows), and since issue 50 the other stages too (models.engine.long_stages).
Side by side in one process, repeated: each stage's overview of one head (reduced to 1024² pixels, as
``--stage NAME --screenshot``), h = 8, d_model = 512, causal, distinct words, torch on 1 thread (the
window's worker on 2 cores; ``weighted_norms`` after the weights, whose rows' statistics it reads, as in
the window). Prints seconds and the ratio to the weights; asserts nothing.

    .venv/bin/python bench/bench_long_stages.py [n] [--repeat R] [--heads H]   (default 16384, 2, 1)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from models.config import AttentionConfig, AttentionRequest  # noqa: E402
from models.engine import pipeline  # noqa: E402
from models.io.heap import map_large_blocks  # noqa: E402
from models.reads.picture import stage_image  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=16384)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--heads", type=int, default=1, help="heads drawn (of 8)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    map_large_blocks()  # as main.py does
    cfg = AttentionConfig(heads=8, d_model=512, mask="causal", max_tokens=args.n)
    trace = pipeline.run(AttentionRequest(config=cfg, sentence=" ".join(f"w{i}" for i in range(args.n))))
    heads = list(range(args.heads))
    names = [n for n in ("weights", "masked", "scores", "weighted_norms") if n in trace]
    print(f"{args.n:,} tokens, {len(heads)} head(s) of 8, seconds per stage (ratio to weights)")
    for run in range(args.repeat):
        took = {}
        for name in names:
            stage = trace[name]
            t0 = time.perf_counter()
            stage_image(stage, heads=heads, max_side=(1024, 1024))  # the weights: the overview, streamed
            took[name] = time.perf_counter() - t0
        print(f"run {run + 1}: " + ", ".join(f"{n} {s:.2f} s ({s / took['weights']:.2f}x)" for n, s in took.items()),
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
