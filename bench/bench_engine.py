"""Engine benchmark: pipeline time and trace size for growing sentences.

    python bench/bench_engine.py [--sizes 64,512,2048] [--repeats 5] [--device cpu]

Every run computes the full trace (every stage read once: ``pipeline.materialize``, the eager
equivalent of the lazy core; see bench_long.py for what the window computes) for h = 8 heads, d_model = 512,
scaled dot-product scores and a causal mask, from a generated sentence of n distinct words
(so tokenizing and the embedding table are part of the time). The time is the median of the
repeats after one warm-up run; "trace" is the sum of the bytes of every stage array.
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from models.config import AttentionConfig, AttentionRequest  # noqa: E402
from models.engine.pipeline import materialize, run  # noqa: E402

HEADS, D_MODEL = 8, 512


def sentence_of(n: int) -> str:
    """``n`` distinct lowercase words: a, b, ..., z, ba, bb, ... (base-26 numerals)."""
    words = []
    for i in range(n):
        word, i = "", i
        while True:
            word = chr(ord("a") + i % 26) + word
            i //= 26
            if i == 0:
                break
        words.append(word)
    return " ".join(words)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError


def bench(n: int, repeats: int, device: str) -> dict[str, float]:
    cfg = AttentionConfig(heads=HEADS, d_model=D_MODEL, score="scaled", mask="causal", device=device, max_tokens=n)
    req = AttentionRequest(config=cfg, sentence=sentence_of(n))
    trace = materialize(run(req))  # warm-up; also the trace whose size is reported
    assert len(trace.key_tokens) == n, (len(trace.key_tokens), n)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        materialize(run(req))
        times.append((time.perf_counter() - t0) * 1000.0)
    weights = trace["weights"].array.nbytes
    return {
        "n": n,
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "trace_bytes": sum(s.array.nbytes for s in trace.stages),
        "largest_stage_bytes": weights,
        "stages": len(trace.stages),
        "device": trace.device,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64,512,2048", help="comma-separated token counts")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per size (after one warm-up)")
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    print(f"engine benchmark: h={HEADS}, d_model={D_MODEL}, scaled scores, causal mask")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, python {platform.python_version()}")
    header = f"{'n':>6}  {'median ms':>10}  {'min ms':>9}  {'trace size':>11}  {'per (h,n,n) stage':>17}  device"
    print(header)
    print("-" * len(header))
    for n in sizes:
        r = bench(n, args.repeats, args.device)
        print(
            f"{r['n']:>6}  {r['median_ms']:>10.1f}  {r['min_ms']:>9.1f}  {human_bytes(r['trace_bytes']):>11}  "
            f"{human_bytes(r['largest_stage_bytes']):>17}  {r['device']}"
        )
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"process peak RSS: {human_bytes(peak_kib * 1024)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
