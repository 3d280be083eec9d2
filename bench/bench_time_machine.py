"""Benchmark the time machine on the shipped ``induction`` model (40 checkpoints), on the CPU:

- the why series of one cell at all 40 checkpoints (target <= 10 s);
- the history: every checkpoint hashed (cold, then from the cache) and its heads' signatures,
  detector scores, matches and events.

    python bench/bench_time_machine.py [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPEATED = "k78lt2nxawscgzef4j1qh69ibu305ok78lt2nxawscgzef4j1qh69ibu305o"
TARGET_S = 10.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    os.environ["ATTENTION_EXPLORER_CACHE"] = tempfile.mkdtemp()
    from models import api
    from models.history.integrity import HashCache, check_history
    from models.history.table import build_history
    from models.pretrained.registry import resolve_model
    from models.pretrained.steps import model_steps

    trace = api.load("induction").trace(REPEATED, layer=1)
    steps = model_steps(resolve_model("induction"))
    why_s, hash_cold, hash_warm, history_s = [], [], [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        series = trace.why(0, 40, 11, steps="all")
        why_s.append(time.perf_counter() - t)
        cache = HashCache(Path(tempfile.mkdtemp()) / "h.json")
        t = time.perf_counter()
        check_history(steps, cache=cache)
        hash_cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        check_history(steps, cache=cache)
        hash_warm.append(time.perf_counter() - t)
        t = time.perf_counter()
        history = build_history(resolve_model("induction"), steps)
        history_s.append(time.perf_counter() - t)
    assert len(series["steps"]) == 40 and len(history.steps) == 40

    def row(name: str, values: list[float], target: str = "") -> str:
        return f"| {name} | {min(values):.2f}–{max(values):.2f} s (median {statistics.median(values):.2f}) | {target} |"

    print(f"time machine, induction model, 40 checkpoints, {args.threads} torch thread(s), {args.rounds} rounds")
    print("| figure | time | target |\n|---|---|---|")
    print(row("why series of one cell at 40 steps", why_s, f"<= {TARGET_S:.0f} s"))
    print(row("content hashes, cold", hash_cold))
    print(row("content hashes, from the cache", hash_warm))
    print(row("history: signatures, detectors, matches, events", history_s))
    print(f"events found: {len(history.events)}")
    return 0 if statistics.median(why_s) <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
