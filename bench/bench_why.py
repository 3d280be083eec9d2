"""Benchmark ``why`` (issue 33): one cell's table for a 6-layer, 12-head model at 128 tokens.

    python bench/bench_why.py [--runs 5]

Prints the median and best time to split one score of MiniLM's last layer (target <= 200 ms), and
the same with the row split (every key the query sees).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_MS = 200.0
TOKENS = 128


def timings_ms(fn, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from models.pretrained import load_model
    from models.reads.why import why

    model = load_model("minilm", device="cpu")
    sentence = " ".join(["the cat sat on the mat while a dog was walking in the park"] * 12)
    layer = model.num_layers - 1
    trace = model.trace(sentence, layer, max_tokens=TOKENS)
    n = len(trace.query_tokens)
    cell = lambda: why(trace, 3, n - 1, 5, model=model)  # noqa: E731
    row = lambda: why(trace, 3, n - 1, 5, model=model, with_row=True)  # noqa: E731
    cell()  # warm
    for what, fn in (("one cell", cell), ("one cell + its row", row)):
        median, best = timings_ms(fn, args.runs)
        verdict = "ok" if median <= TARGET_MS else "SLOW"
        print(f"why, {what}: layer {layer} of MiniLM (6 layers × 12 heads), {n} tokens: median {median:.0f} ms, "
              f"best {best:.0f} ms (target <= {TARGET_MS:.0f} ms: {verdict})")


if __name__ == "__main__":
    main()
