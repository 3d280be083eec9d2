"""A stage drawn as a strip beside the one shown (issue 50, point 1): the window asks for the neighbour
stages at ``max_side=(1, 246)``, one pixel row over every query row. That pixel row is folded from
bands of bounded rows, never read as one (n, n) band: the rows asked of the store per call are
bounded by a band, not n; the strip equals the one read whole; and the window at a length where the
band was a whole head (16,384 tokens: 1 GiB a head) draws under a memory cap."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.config import AttentionConfig, AttentionRequest
from models.engine import pairs
from models.engine import reduce as R
from models.engine.pipeline import run

ROOT = Path(__file__).resolve().parents[2]


def distinct_words(n: int) -> str:
    """``n`` different words (a, b, …, z, ba, bb, …): no repeated token."""
    words = []
    for i in range(n):
        word = ""
        while True:
            word, i = chr(ord("a") + i % 26) + word, i // 26
            if i == 0:
                break
        words.append(word)
    assert len(set(words)) == n
    return " ".join(words)


def trace_of(n: int, heads: int = 2):
    return run(AttentionRequest(config=AttentionConfig(heads=heads, d_model=8, mask="causal"),
                                sentence=distinct_words(n)))  # fmt: skip


@pytest.mark.parametrize("long", [False, True], ids=["blocks", "long store"])
def test_the_neighbour_strips_read_bounded_blocks_of_rows_not_the_whole_head(monkeypatch, long):
    if long:
        monkeypatch.setattr(pairs, "LONG_CELLS", 100)  # the weights from the rows' statistics
    n = 4096  # 16.8 M cells a head: twice a band
    trace = trace_of(n)
    asked = []
    rows, block = pairs.PairStore.rows_tensor, pairs.PairStore.block_tensor  # the reads on the device

    def spy_rows(self, name, head, r0, r1, keep=True, own=False):
        asked.append(min(r1, self.n_q) - r0)
        return rows(self, name, head, r0, r1, keep, own)

    def spy_block(self, name, head, b, keep=True):
        asked.append(self.block_rows)
        return block(self, name, head, b, keep)

    monkeypatch.setattr(pairs.PairStore, "rows_tensor", spy_rows)
    monkeypatch.setattr(pairs.PairStore, "block_tensor", spy_block)
    bound = max(trace["masked"].store.block_rows, R.BAND_CELLS // n)
    for name in ("scores", "masked", "weights", "weighted_norms"):
        if trace[name].streamed:
            continue
        asked.clear()
        out = R.reduce_heads(trace[name], [0, 1], (1, 246), signed=name != "weights")
        assert out[0].peak.shape == (1, 241) and out[0].step == (n, 17)  # one pixel row over every query
        # a long store's stages are reduced from tiles of Q and K (models.engine.long_stages): no rows read
        assert (not asked if long else asked) and max(asked, default=0) <= bound < n, (name, asked[:3])


@pytest.mark.parametrize("side", [(1, 37), (3, 50), (7, 301), (2, 5)])
def test_a_strip_folded_from_bands_is_the_strip_read_whole(monkeypatch, side):
    trace = trace_of(301)
    whole = {}
    for name in trace.names:
        stage = trace[name]
        if len(stage.shape) < 2:
            continue
        for signed in (True, False):
            whole[name, signed] = [R.reduce_head(stage, h, side, signed=signed) for h in range(stage.heads)]
    monkeypatch.setattr(R, "BAND_CELLS", 50)  # every pixel row taller than a band: folded
    for (name, signed), want in whole.items():
        stage = trace[name]
        got = [R.reduce_head(stage, h, side, signed=signed) for h in range(stage.heads)]
        for a, b in zip(got, want):
            assert (a.region, a.step) == (b.region, b.step)
            np.testing.assert_array_equal(a.peak, b.peak, err_msg=name)  # maxima: no rounding
            assert (a.masked is None) == (b.masked is None), name
            if a.masked is not None:
                np.testing.assert_allclose(a.masked, b.masked, rtol=1e-6)
            np.testing.assert_array_equal(np.array(a.finite_range), np.array(b.finite_range))


STRIP = """
import sys
from models.config import AttentionConfig, AttentionRequest
from models.engine.pipeline import run
from models.reads.picture import stage_image
from tests.models.test_reduce_strips import distinct_words
trace = run(AttentionRequest(config=AttentionConfig(heads=1, d_model=8, mask="causal"),
                             sentence=distinct_words(16_384)))
image = stage_image(trace["masked"], max_side=(1, 246))  # as the window's worker asks for a neighbour
print(image.indices.shape)
"""


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)")
def test_a_neighbour_strip_at_16384_tokens_is_drawn_under_a_memory_cap():
    # 2 GB of address space: the memory check admits 16,384 tokens; before, the strip read the head's
    # (16384, 16384) masked scores as one band (1 GiB) and torch could not allocate its −∞ mask.
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    done = subprocess.run(["prlimit", "--as=2000000000", sys.executable, "-c", STRIP], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stdout.split() == ["(1,", "1,", "245)"]
