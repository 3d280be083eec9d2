"""Long inputs on the lazy core (issue 7): what an edit costs until the weights of every head are on
screen, the trace against PyTorch's fused attention, and the peak memory, for h = 8, d_model = 512,
causal, as the window's worker runs it (torch on cores − 1 threads). Each size runs in a fresh
process so that peak RSS (VmHWM) is its own. Prints a table; asserts nothing.

    .venv/bin/python bench/bench_long.py [n ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1024, 4096, 16384)

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))  # as the window's worker
import torch.nn.functional as F
from models import pipeline
from models.config import AttentionConfig, AttentionRequest
from explorer.engine.stage_render import stage_image

n = int(sys.argv[2])
sentence = " ".join(f"w{i % 5000}" for i in range(n))
cfg = AttentionConfig(heads=8, d_model=512, mask="causal")
req = AttentionRequest(config=cfg, sentence=sentence)
pipeline.run(AttentionRequest(config=cfg, sentence="warm up"))
t0 = time.perf_counter()
trace = pipeline.run(req)                      # inputs, Q, K, V; n×n stages lazy
t1 = time.perf_counter()
image = stage_image(trace["weights"])          # every head's weights reduced to the screen
t2 = time.perf_counter()
out = {"n": n, "run_s": t1 - t0, "display_s": t2 - t1}
if n <= 4096:
    q, k, v = (torch.from_numpy(trace[s].array)[None] for s in ("q", "k", "v"))  # (1, h, n, d)
    best = float("inf")
    for _ in range(3):
        s0 = time.perf_counter()
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
        best = min(best, time.perf_counter() - s0)
    out["sdpa_s"] = best
    trace = pipeline.run(req)
    h0 = time.perf_counter()
    trace["head_output"].array                 # every head's A V, through the explicit stages
    out["head_output_s"] = time.perf_counter() - h0
status = open("/proc/self/status").read().split("\n")
out["peak_rss_gib"] = int(next(l for l in status if l.startswith("VmHWM")).split()[1]) / 2**20
print(json.dumps(out))
"""


def main(sizes) -> None:
    print(f"h = 8, d_model = 512, causal, torch threads = {max(1, (os.cpu_count() or 2) - 1)}")
    print(f"{'n':>6}  {'Q,K,V':>7}  {'weights on screen':>17}  {'edit→image':>10}  {'A·V all heads':>13}  "
          f"{'SDPA':>7}  {'ratio':>5}  {'peak RSS':>8}")  # fmt: skip
    for n in sizes:
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(n)], capture_output=True, text=True)
        if done.returncode:
            print(f"{n:>6}  failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        ratio = f"{r['head_output_s'] / r['sdpa_s']:.1f}" if "sdpa_s" in r else "—"
        extra = (f"{r['head_output_s']:>12.2f}s  {r['sdpa_s']:>6.2f}s" if "sdpa_s" in r else f"{'—':>13}  {'—':>7}")
        print(f"{n:>6}  {r['run_s']:>6.2f}s  {r['display_s']:>16.2f}s  {r['run_s'] + r['display_s']:>9.2f}s  "
              f"{extra}  {ratio:>5}  {r['peak_rss_gib']:>6.2f} GiB   ({time.perf_counter() - t:.0f} s)")  # fmt: skip


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or SIZES)
