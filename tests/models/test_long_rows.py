"""Long inputs (issue 34): the weights from each row's statistics, never a stored map, equal a float64
softmax of the same row, for tiles, rows and single cells, at 32,768 tokens and more; the streamed
overview keeps every peak where it is, as the block softmax's reduction does."""

import numpy as np
import pytest
import torch

from models.engine import long_rows, pairs
from models.engine.attend import Variant
from models.engine.masks import MaskSpec
from models.engine.reduce import reduce_head
from models.engine.trace import Stage


def _spec(n, h=2, d=8, seed=0, mask=None, sinks=False, softcap=None, temperature=1.0, scale=("div", 8 ** 0.5)):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(h, n, d, generator=g) * 2 for _ in range(3))
    variant = Variant(scale=scale[1], divide=scale[0] == "div", softcap=softcap, temperature=temperature,
                      sinks=torch.tensor([0.5, -1.0][:h]) if sinks else None)  # fmt: skip
    variant = variant.with_mask(mask or MaskSpec(causal=True))
    return pairs.PairSpec(q=q, k=k, v=v, head_groups=tuple(range(h)), variant=variant)


def _reference(spec, head, r0, r1):
    """Rows r0:r1 of one head's weights, float64, by the definition."""
    q, k = spec.q[head, r0:r1].double(), spec.k[spec.head_groups[head]].double()
    x = q @ k.T
    kind, value = spec.scale
    x = x / value if kind == "div" else x * value
    if spec.softcap is not None:
        x = spec.softcap * torch.tanh(x / spec.softcap)
    hidden = spec.mask.rows(r0, r1, k.shape[0], x.device)
    if hidden is not None:
        x = x.masked_fill(hidden, float("-inf"))
    if spec.sinks is not None:
        x = torch.cat([x, spec.sinks[head].double().expand(x.shape[0], 1)], dim=1)
    return torch.softmax(x / spec.temperature, dim=-1).nan_to_num(0.0).numpy()


CASES = {
    "causal": {},
    "window": dict(mask=MaskSpec(causal=True, window=5)),
    "padding": dict(mask=MaskSpec(pads=(0, 3, 4))),
    "temperature": dict(temperature=0.3),
    "sinks+softcap": dict(sinks=True, softcap=3.0),
    "band": dict(mask=MaskSpec(band=4), scale=("mul", 0.7)),
}


@pytest.mark.parametrize("tiles", [False, True])  # the rows' statistics over whole rows, or tiles of keys
@pytest.mark.parametrize("case", sorted(CASES))
def test_long_rows_equal_the_softmax_of_the_blocks(case, tiles, monkeypatch):
    if tiles:
        monkeypatch.setattr(long_rows, "TILE_KEYS", 13)
        monkeypatch.setattr(long_rows, "TILE_ROWS", 8)
    spec = _spec(100, **CASES[case])
    short, long = pairs.PairStore(spec, long=False), pairs.PairStore(spec, long=True)
    for head in range(2):
        want = _reference(spec, head, 0, 100)
        np.testing.assert_allclose(long.head("weights", head), want, rtol=2e-5, atol=1e-7)
        np.testing.assert_allclose(short.head("weights", head), want, rtol=2e-5, atol=1e-7)
        np.testing.assert_allclose(long.region("weights", head, 30, 47, 11, long.n_k), want[30:47, 11:],
                                   rtol=2e-5, atol=1e-7)  # fmt: skip
        for name in ("scores", "masked"):  # the other stages of a long store: the same cells
            want = short.rows(name, head, 30, 47)[:, 11:60]
            np.testing.assert_array_equal(long.region(name, head, 30, 47, 11, 60), want)


@pytest.mark.parametrize("tiles", [False, True])  # whole rows, or tiles of keys (as past 8,192 keys)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_streamed_overview_is_the_block_reduction(case, tiles, monkeypatch):
    if tiles:
        monkeypatch.setattr(long_rows, "TILE_KEYS", 37)
        monkeypatch.setattr(long_rows, "TILE_ROWS", 24)
    spec = _spec(300, **CASES[case])
    short, long = pairs.PairStore(spec, long=False), pairs.PairStore(spec, long=True)
    for region, side in (((0, 300, 0, short.n_k), 64), ((17, 290, 5, 201), (40, 33))):
        for head in range(2):
            done: list[int] = []
            got = reduce_head(Stage("weights", "", "", "", store=long), head, side, region, signed=False,
                              on_rows=lambda rows, peak, done=done: done.append(rows))  # fmt: skip
            want = reduce_head(Stage("weights", "", "", "", store=short), head, side, region, signed=False)
            assert got.step == want.step and got.peak.shape == want.peak.shape
            np.testing.assert_allclose(got.peak, want.peak, rtol=2e-5, atol=1e-7)
            assert done == sorted(done) and done[-1] == got.peak.shape[0]  # top to bottom, to the end
    assert long.long.known.all()  # the overview learned every row's statistics on the way


def test_a_cell_is_not_a_whole_map():
    """Reading a tile of a long store computes the statistics of its rows only, and no block of rows."""
    spec = _spec(2000)
    store = pairs.PairStore(spec, long=True)
    computed = []
    store.on_compute = lambda *a: computed.append(a)
    store.region("weights", 1, 1500, 1510, 100, 140)
    assert computed == [] and int(store.long.known.sum()) == 10


def test_32768_tokens_tiles_rows_and_cells_equal_a_float64_softmax():
    n = 32768
    spec = _spec(n, h=1, d=16, seed=3)
    store = pairs.PairStore(spec)
    assert store.long is not None  # chosen by size
    rows = store.rows("weights", 0, 32000, 32004)  # whole rows
    np.testing.assert_allclose(rows, _reference(spec, 0, 32000, 32004), rtol=1e-5, atol=1e-9)
    assert abs(rows.sum(axis=1) - 1).max() < 1e-5
    tile = store.region("weights", 0, 20000, 20256, 19800, 20056)  # a 256 × 256 zoomed tile
    np.testing.assert_allclose(tile, _reference(spec, 0, 20000, 20256)[:, 19800:20056], rtol=1e-5, atol=1e-9)
    want = _reference(spec, 0, n - 1, n)[0, 12345]
    assert store.cell("weights", 0, n - 1, 12345) == pytest.approx(want, rel=1e-5, abs=1e-10)


def test_65536_tokens_isolated_peaks_are_where_they_are():
    """Two queries put all their weight on one far key each; the overview at 512 pixels shows a
    peak of ~1 in exactly those pixels (and the rest of their rows' pixels far below)."""
    n, d = 65536, 4
    q, k = torch.zeros(1, n, d), torch.zeros(1, n, d)
    peaks = [(60000, 123), (40000, 39990)]
    for axis, (r, c) in enumerate(peaks):
        q[0, r, axis], k[0, c, axis] = 40.0, 40.0
    spec = pairs.PairSpec(q=q, k=k, v=torch.zeros(1, n, 1), head_groups=(0,), variant=Variant(scale=None, causal=True))
    store = pairs.PairStore(spec)
    got = reduce_head(Stage("weights", "", "", "", store=store), 0, 512, signed=False)
    kr, kc = got.step
    for r, c in peaks:
        assert got.peak[r // kr, c // kc] > 0.99
        row = got.peak[r // kr].copy()
        row[c // kc] = 0
        assert row.max() < 0.02  # a uniform row of the same block holds 1/64 at most


@pytest.mark.parametrize("side", [64, (70, 90)])  # blocks that line up with the pixels, and that do not
def test_a_pass_over_a_stage_larger_than_the_budget_keeps_none_of_it(side):
    """Issue 32's memory: the window's reductions (the stage, then its regions at the plot's pixels) of
    a stage larger than the cache's budget filled the budget (768 MiB at 16,384 tokens) for nothing."""
    spec = _spec(600)
    store = pairs.PairStore(spec, budget=2 << 20, long=False)  # 2 × 600² × 4 bytes: more than 2 MiB
    for name in ("scores", "masked", "weights"):
        reduce_head(Stage(name, "", "", "", store=store), 1, side, signed=name != "weights")
        reduce_head(Stage(name, "", "", "", store=store), 1, side, (5, 300, 7, 500), signed=name != "weights")
    assert store.cached_bytes == 0
    small = pairs.PairStore(spec, long=False)  # one that fits: its blocks are kept, as before
    reduce_head(Stage("scores", "", "", "", store=small), 1, 64)
    assert small.cached_bytes > 0
