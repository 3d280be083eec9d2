"""models.engine.reduce: a small stage's heads reduced together give exactly what each head reduced
alone gives (peaks, masked shares, exact finite range), for in-memory and lazily computed stages,
signed and not, masks, NaN, a head with no finite value, regions, and steps that do not divide."""

import numpy as np
import pytest

from models import api
from models.config import AttentionConfig, AttentionRequest
from models.engine import reduce as R
from models.engine.pipeline import run
from models.engine.trace import Stage


def same(together, alone):
    assert len(together) == len(alone)
    for a, b in zip(together, alone):
        assert (a.region, a.step) == (b.region, b.step)
        np.testing.assert_array_equal(a.peak, b.peak)  # NaN where NaN, −∞ where −∞
        assert (a.masked is None) == (b.masked is None)
        if a.masked is not None:
            np.testing.assert_array_equal(a.masked, b.masked)
        np.testing.assert_array_equal(np.array(a.finite_range), np.array(b.finite_range))


def check(stage, sides, regions=(None,)):
    heads = list(range(stage.heads))
    for side in sides:
        for region in [r for r in regions if r is None or (r[1] <= stage.shape[-2] and r[3] <= stage.shape[-1])]:
            for signed in (True, False):
                alone = [R.reduce_head(stage, h, side, region, signed) for h in heads]
                same(R.reduce_heads(stage, heads, side, region, signed), alone)


SIDES = [(53, 132), (20, 20), (61, 30), (7, 61), 1024]


def test_a_toy_trace_every_stage():
    trace = run(AttentionRequest(config=AttentionConfig(heads=4, d_model=16, mask="causal"),
                                 sentence=" ".join(f"w{i}" for i in range(61))))  # fmt: skip
    for stage in trace.stages:
        check(stage, SIDES, (None, (3, 50, 0, 61), (0, 61, 10, 45)))


def test_a_pretrained_decoder_s_lazy_stages():
    trace = api.load("induction").trace("abcdefghij" * 5, layer=1).raw
    lazy = [s for s in trace.stages if s.store is not None]
    assert lazy  # the n×n stages are computed per head and block of rows
    for stage in lazy:
        check(stage, SIDES, (None, (5, 40, 2, 33)))


@pytest.mark.parametrize("side", [(10, 10), (33, 17), (4, 50)])
def test_nan_masked_cells_and_a_head_with_no_finite_value(side):
    g = np.random.default_rng(0)
    a = g.normal(size=(3, 50, 50)).astype(np.float32)
    a[0, 7, 9] = np.nan
    a[0][np.triu_indices(50, 1)] = -np.inf
    a[1, :, :] = -np.inf  # nothing visible
    a[2, 20:30, 5] = -np.inf
    a[2, 45, 45] = 40.0
    check(Stage("scores", "t", "f", "d", array=a, per_head=True), [side])


def test_a_large_stage_is_reduced_one_head_at_a_time(monkeypatch):
    calls = []
    real = R.reduce_head
    monkeypatch.setattr(R, "reduce_head", lambda stage, h, *a, **k: calls.append(h) or real(stage, h, *a, **k))
    big = Stage("weights", "t", "f", "d", array=np.random.default_rng(1).random((2, 400, 400), dtype=np.float32),
                per_head=True)
    R.reduce_heads(big, [0, 1], (50, 50))
    assert calls == [0, 1]  # 320,000 cells: more than SMALL_CELLS
    small = Stage("weights", "t", "f", "d", array=np.random.default_rng(1).random((4, 60, 60), dtype=np.float32),
                  per_head=True)
    del calls[:]
    R.reduce_heads(small, [0, 1, 2, 3], (50, 50))
    assert calls == []  # together
