"""Memory estimate vs the real peak: does ``models.memory`` refuse only what would not fit?

    python bench/bench_memory.py

Each case runs ``main.py export`` in a fresh process, which records its resident size after the
imports and its peak resident size (``ru_maxrss``) at the end; "growth" is the difference, what
the request itself cost. "estimate" is :func:`models.memory.estimate_toy_peak` (which includes a
fixed margin of 64 MiB for allocator slack and thread pools). ratio = growth / estimate; below 1
means the estimate is an upper bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from models.config import AttentionConfig  # noqa: E402
from models.memory import MARGIN, estimate_toy_peak  # noqa: E402

CHILD = r"""
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from models.cli.export import export_main
import models.engine.pipeline, models.files.export, models.engine.weights, torch
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
before = rss()
rc = export_main(sys.argv[2:])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"rc": rc, "before": before, "peak": peak}))
"""

CASES = [
    # (label, heads, d_model, d_k, score, n tokens)
    ("h=8 d=512 scaled n=1024", 8, 512, None, "scaled", 1024),
    ("h=16 d=256 scaled n=2048", 16, 256, None, "scaled", 2048),
    ("h=4 d=64 additive n=512", 4, 64, None, "additive", 512),
    ("h=2 d=16 d_k=40000 general n=8", 2, 16, 2000, "general", 8),
]


def measure(heads, d_model, d_k, score, n) -> dict:
    sentence = " ".join(f"w{i}" for i in range(n))
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["--sentence", sentence, "--heads", str(heads), "--d-model", str(d_model), "--score", score,
                "--mask", "causal", "--out", str(Path(tmp) / "run")]  # fmt: skip
        if d_k:
            argv += ["--d-k", str(d_k)]
        done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), *argv], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    mib = 2**20
    print(f"margin included in every estimate: {MARGIN / mib:.0f} MiB")
    print(f"{'case':<34} {'estimate':>10} {'growth':>10} {'ratio':>6}")
    for label, heads, d_model, d_k, score, n in CASES:
        cfg = AttentionConfig(heads=heads, d_model=d_model, d_k=d_k, score=score, mask="causal")
        estimate = estimate_toy_peak(cfg, n, n, False)
        r = measure(heads, d_model, d_k, score, n)
        assert r["rc"] == 0
        growth = r["peak"] - r["before"]
        print(f"{label:<34} {estimate / mib:>8.0f} MiB {growth / mib:>6.0f} MiB {growth / estimate:>6.2f}")


if __name__ == "__main__":
    main()
