"""Benchmark the pretrained-model engine on the bundled all-MiniLM-L6-v2.

    python bench/bench_pretrained.py [--runs 5] [--device auto] [--threads N]

Prints the median time to load the model (target <= 3 s) and to trace one layer of a 128-token
sentence (target <= 300 ms). "cold" traces run every block below the layer from scratch (a new
sentence); "cached" traces reuse the hidden states of the same sentence (stepping layers).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LOAD_TARGET_S = 3.0
TRACE_TARGET_MS = 300.0
TOKENS = 128


def timings_ms(fn, runs: int) -> tuple[float, float]:
    """(median, best) of ``runs`` calls: the best shows the cost on an otherwise idle CPU."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "SLOW"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()

    start = time.perf_counter()
    import torch

    from models.pretrained import load_model  # torch, tokenizers, safetensors

    import_s = time.perf_counter() - start
    print(f"import models.pretrained (incl. torch): {import_s:.2f} s (once per process)")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()} (a busy CPU makes many threads slower)")

    load_ms, best = timings_ms(lambda: load_model("minilm", device=args.device), args.runs)
    load_s = load_ms / 1000
    print(
        f"load 'minilm' (median of {args.runs}): {load_s:.3f} s, best {best / 1000:.3f} s  "
        f"[target <= {LOAD_TARGET_S:.0f} s: {verdict(load_s, LOAD_TARGET_S)}]"
    )

    model = load_model("minilm", device=args.device)
    words = (
        "the quick brown fox jumps over the lazy dog while attention heads watch every token "
    ).split()
    sentence = " ".join(words[i % len(words)] for i in range(3 * TOKENS))
    trace = model.trace(sentence, 0, max_tokens=TOKENS)
    assert len(trace.query_tokens) == TOKENS
    print(f"device {trace.device}, {model}, {TOKENS} tokens")

    counter = iter(range(10**9))

    def cold(layer: int):
        # a different sentence each run, so nothing is cached
        return lambda: model.trace(f"{next(counter)} {sentence}", layer, max_tokens=TOKENS)

    last = model.num_layers - 1
    for label, fn in (
        ("trace layer 0, cold", cold(0)),
        (f"trace layer {last}, cold (runs {last} blocks first)", cold(last)),
        (f"trace layer {last}, cached", lambda: model.trace(sentence, last, max_tokens=TOKENS)),
    ):
        fn()  # warm-up (allocator, kernels)
        ms, best = timings_ms(fn, args.runs)
        print(
            f"{label} (median of {args.runs}): {ms:.1f} ms, best {best:.1f} ms  "
            f"[target <= {TRACE_TARGET_MS:.0f} ms: {verdict(ms, TRACE_TARGET_MS)}]"
        )


if __name__ == "__main__":
    main()
