"""A pass over a long input's stage gives its freed bands back (issue 50, point 1): ``--stage masked`` of
a 16,384-token window grew 25 MiB a band of 16 MiB, to 1.8 GiB for one head, because glibc raised its
mmap threshold to the band's size and the bands then came from a heap that small results pinned.
main.py fixes the threshold (models/io/heap.py); in a fresh process the same pass stays within a few bands."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import resource, sys
from main import interrupted_main  # noqa: F401  (the entry point's module, as a run imports it)
from models.io.heap import map_large_blocks
assert map_large_blocks()
from models.config import AttentionConfig, AttentionRequest
from models.engine.pipeline import run
from models.engine import reduce as R
n = 16384  # 2^28 cells a head: a long store, its blocks not kept (more than the budget)
sentence = " ".join(f"w{i}" for i in range(n))
trace = run(AttentionRequest(config=AttentionConfig(heads=1, d_model=8, mask="causal"), sentence=sentence))
assert not trace["masked"].store.fits and trace["masked"].store.blocks == 64
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
R.reduce_head(trace["masked"], 0, (1024, 1024), signed=True)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10)
"""


@pytest.mark.skipif(ctypes.util.find_library("c") is None or sys.platform != "linux", reason="glibc's malloc only")
def test_a_pass_over_64_bands_of_16_mib_grows_by_a_few_bands_not_all_of_them():
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    grew_mib = int(out.stdout.split()[-1])
    assert grew_mib < 300, f"the pass kept {grew_mib} MiB (64 bands of 16 MiB; 1,201 MiB before the fix)"
