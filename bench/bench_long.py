"""Long inputs (issues 7 and 34): the figures of issue 34's target table for h = 8, d_model = 512,
causal, torch on 1 thread, each size in a fresh process (so that its peak RSS is its own). Prints a
table; asserts nothing.

    .venv/bin/python bench/bench_long.py [n ...]            the engine (default 1024 4096 16384)
    .venv/bin/python bench/bench_long.py --window [n ...]   also the whole window's peak RSS (a
                                                            screenshot of the weights, /usr/bin/time -v)
    ... [--root DIR] [--against DIR]                        the code of checkout DIR; --against: a second
                                                            checkout's, each size side by side in one run
    .venv/bin/python bench/bench_long.py --model [random-llama|FOLDER] [n ...] [--overview]
                                                            a decoder (bench/bench_long_model.py)

Per size: the run (``pipeline.run``: inputs, and Q, K, V, projected head by head when first read
since issue 34); every head's weights on screen (the overview, reduced to 1024² keeping every peak,
from the end of the run); the first rows of the first head (the first block of rows streamed, from
the request, as after an edit: the run, then the overview; the cold tiles between them left out);
PyTorch's fused attention forward over the same 8 heads (SDPA, same thread); a 256 × 256 tile of
every head near the last row, before the overview (its rows' statistics computed then, and since
issue 34 the heads' Q and K projected) and after; ``explain`` of a weight at row n − 72 against a
float64 softmax of its row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1024, 4096, 16384)

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)  # as the window's worker on 2 cores
import torch.nn.functional as F
try:
    from models.engine import pipeline
except ImportError:  # the layout before models/engine
    from models import pipeline
from models.config import AttentionConfig, AttentionRequest
from models.reads.explain import explain
from models.reads.params import toy_params
from models.reads.picture import stage_image

n = int(sys.argv[2])
sentence = " ".join(f"w{i}" for i in range(n))  # distinct words (issue 45)
cfg = AttentionConfig(heads=8, d_model=512, mask="causal", max_tokens=n)
req = AttentionRequest(config=cfg, sentence=sentence)
pipeline.run(AttentionRequest(config=cfg, sentence="warm up"))
out = {"n": n}
t0 = time.perf_counter()
trace = pipeline.run(req)                      # inputs, Q, K, V; n×n stages lazy
out["run_s"] = time.perf_counter() - t0
weights = trace["weights"]
store = weights.store
new = hasattr(store, "region")  # the code of issue 34 (an older checkout: the old figures only)
r1 = min(n, n - 72 + 128)
tile = (max(0, r1 - 256), r1, max(0, r1 - 456), max(256, r1 - 200))
if new:
    t = time.perf_counter()
    for h in range(8):
        store.region("weights", h, *tile)
    out["tile_cold_s"] = time.perf_counter() - t
first = []
t1 = time.perf_counter()
if new and store.long is not None:  # streamed: the first block of rows is on its way to the screen
    from explorer.engine.long_render import Overviews
    image = Overviews().stream(trace, weights, False, None, lambda image: None,
                               lambda: first or first.append(out["run_s"] + time.perf_counter() - t1))
    out["first_rows_s"] = first[0]
else:
    image = stage_image(weights)               # every head's weights reduced to the screen
out["display_s"] = time.perf_counter() - t1
if new:
    t = time.perf_counter()
    for h in range(8):
        store.region("weights", h, *tile)
    out["tile_s"] = time.perf_counter() - t
q, k, v = (torch.from_numpy(trace[s].array)[None] for s in ("q", "k", "v"))  # (1, h, n, d)
s0 = time.perf_counter()
F.scaled_dot_product_attention(q, k, v, is_causal=True)
out["sdpa_s"] = time.perf_counter() - s0
if new:
    row, col = n - 72, 5
    e0 = time.perf_counter()
    d = explain(trace, toy_params(req), "weights", (0, row, col))
    out["explain_s"] = time.perf_counter() - e0
    want = torch.softmax(q[0, 0, row].double() @ k[0, 0, : row + 1].double().T / 8.0, 0)[col]
    out["explain_err"] = abs(d.value - float(want)) / float(want)
status = open("/proc/self/status").read().split("\n")
out["peak_rss_gib"] = int(next(l for l in status if l.startswith("VmHWM")).split()[1]) / 2**20
print(json.dumps(out))
"""


def window_peak(n: int, root: Path) -> tuple[float, float] | None:
    """(peak RSS GiB, wall s) of the whole window showing every head's weights at ``n`` tokens."""
    with tempfile.TemporaryDirectory() as tmp:
        text, shot = Path(tmp) / "text.txt", Path(tmp) / "shot.png"
        text.write_text(" ".join(f"w{i}" for i in range(n)))  # distinct words
        given = ["--text-file", str(text)] if any((root / "models").glob("**/text_file.py")) else \
            ["--sentence", text.read_text()]  # the code before issue 34 (16,384 tokens fit in one argument)
        cmd = ["/usr/bin/time", "-v", sys.executable, str(root / "main.py"), *given, "--heads", "8",
               "--d-model", "512", "--mask", "causal", "--stage", "weights", "--screenshot", str(shot)]
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | {"QT_QPA_PLATFORM": "offscreen"})
        wall = time.perf_counter() - t
        if done.returncode:
            return None
        kib = next(int(line.split()[-1]) for line in done.stderr.splitlines() if "Maximum resident" in line)
        return kib / 2**20, wall


def _option(argv: list[str], name: str) -> tuple[Path | None, list[str]]:
    if name not in argv:
        return None, argv
    at = argv.index(name)
    return Path(argv[at + 1]).resolve(), argv[:at] + argv[at + 2 :]


def main(argv: list[str]) -> None:
    window = "--window" in argv
    root, argv = _option(argv, "--root")  # another checkout's code (the code before)
    against, argv = _option(argv, "--against")  # and a second checkout, each size side by side in one run
    roots = [root or ROOT] + ([against] if against else [])
    if "--model" in argv:  # a decoder's long inputs (bench/bench_long_model.py)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench_long_model

        return bench_long_model.main(argv[argv.index("--model") + 1 :], roots[0])
    sizes = [int(a) for a in argv if a != "--window"] or SIZES
    for i, r in enumerate(roots):
        print(f"code {'ab'[i]}: {r}")
    print("h = 8, d_model = 512, causal, 1 torch thread")
    print(f"{'n':>9}  {'run':>6}  {'overview':>8}  {'SDPA':>7}  {'ratio':>5}  {'1st rows':>8}  {'tile cold':>9}  "
          f"{'tile':>6}  {'explain':>7}  {'rel.err':>7}  {'peak':>8}  {'window':>15}")  # fmt: skip
    for n in sizes:
        for i, code in enumerate(roots):
            _row(n, code, window, f"{n} {'ab'[i]}" if against else str(n))


def _row(n: int, root: Path, window: bool, label: str) -> None:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(root), str(n)], capture_output=True, text=True)
    if done.returncode:
        print(f"{label:>9}  failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}")
        return
    r = json.loads(done.stdout.strip().splitlines()[-1])
    first = f"{r['first_rows_s']:.2f}s" if "first_rows_s" in r else "—"
    cold = f"{r['tile_cold_s'] * 1e3:.0f}ms" if "tile_s" in r else "—"
    tile = f"{r['tile_s'] * 1e3:.0f}ms" if "tile_s" in r else "—"
    expl = (f"{r['explain_s']:.2f}s", f"{r['explain_err']:.1e}") if "explain_s" in r else ("—", "—")
    win = ""
    if window:
        got = window_peak(n, root)
        win = f"{got[0]:.2f} GiB {got[1]:.0f}s" if got else "failed"
    print(f"{label:>9}  {r['run_s']:>5.2f}s  {r['display_s']:>7.2f}s  {r['sdpa_s']:>6.2f}s  "
          f"{r['display_s'] / r['sdpa_s']:>5.2f}  {first:>8}  {cold:>9}  {tile:>6}  {expl[0]:>7}  {expl[1]:>7}  "
          f"{r['peak_rss_gib']:>4.2f} GiB  {win:>15}   ({time.perf_counter() - t:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
