"""Every stage of a long input drawn as the window draws it, under a memory cap (issue 50, point 1, and
the "every stage × long lengths under a memory cap" row of docs/hardening.md's round 4): at 16,384
tokens (a long store: 1 GiB a head, more than the cache's budget) each stage's overview and its
neighbour strip are made in a 2 GB address space, one line each, no traceback. 'concat' asked
(16,384 × 16,384) weights at once and 'masked' grew 25 MiB a band before."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVERY_STAGE = """
from models.io.heap import map_large_blocks
map_large_blocks()  # as main.py does
from models.reads.picture import stage_image
from models.config import AttentionConfig, AttentionRequest
from models.engine.pipeline import run
n = 16384
trace = run(AttentionRequest(config=AttentionConfig(heads=1, d_model=8, mask="causal"),
                             sentence=" ".join(f"w{i}" for i in range(n))))
assert trace["weights"].store.long is not None and not trace["weights"].store.fits
for name in trace.names:
    stage = trace[name]
    for side in ((1024, 1024), (1, 246)):  # the stage shown, and a neighbour's strip
        image = stage_image(stage, max_side=side)
    print(name, image.indices.shape[1], flush=True)
"""


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)")
def test_every_stage_of_16384_tokens_is_drawn_in_2_gb():
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    done = subprocess.run(["prlimit", "--as=2000000000", sys.executable, "-c", EVERY_STAGE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    drawn = [line.split()[0] for line in done.stdout.splitlines()]
    assert {"embeddings", "q", "scores", "masked", "weights", "head_output", "concat", "output"} <= set(drawn)
