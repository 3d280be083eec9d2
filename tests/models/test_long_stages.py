"""A long store's stages besides its weights reduced tile by tile, as its weights are (issue 50, point 1):
``--stage masked`` and ``--stage scores`` at 16,384 tokens cost 3-4x the weights, reduced from whole
rows of 16 MiB blocks (the unseen keys filled with -inf, then scanned twice more). Now the pixels, the
masked shares and the ranges are those of the blocks' reduction (a store that is not long), for every
mask and variant of the long rows' cases, any tile size, region and step; and the work is counted:
no block of whole rows is computed, the scores are computed in tiles of at most TILE_ROWS x TILE_KEYS
cells, and, after a causal mask, only the keys some query of a tile sees."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.engine import attention, long_rows, pairs
from models.engine.attend import Variant
from models.engine.reduce import reduce_head
from models.engine.trace import Stage
from tests.models.test_long_rows import CASES, _spec


def _with_norms(spec):
    """The spec with an output matrix: its ``weighted_norms`` stage too."""
    g = torch.Generator().manual_seed(5)
    h, _, d_v = spec.v.shape
    return pairs.PairSpec(q=spec.q, k=spec.k, v=spec.v, head_groups=spec.head_groups, variant=spec.variant,
                          w_o=torch.randn(h * d_v, 6, generator=g))  # fmt: skip


def _same(got, want, name):
    assert (got.region, got.step, got.peak.shape) == (want.region, want.step, want.peak.shape), name
    np.testing.assert_allclose(got.peak, want.peak, rtol=2e-5, atol=1e-6, err_msg=name)
    assert (got.masked is None) == (want.masked is None), name
    if got.masked is not None:
        np.testing.assert_allclose(got.masked, want.masked, rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(np.array(got.finite_range), np.array(want.finite_range), rtol=2e-5, atol=1e-6,
                               err_msg=name)  # fmt: skip


@pytest.fixture
def one_thread():
    """Tiles of a few cells, thousands of them: one thread (as the window's worker on 2 cores); two on a
    loaded machine wait for each other in every small pooling (30x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("tiles", [(8, 13), (24, 37)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_stage_of_a_long_store_reduces_as_its_blocks_do(monkeypatch, one_thread, case, tiles):
    monkeypatch.setattr(long_rows, "TILE_ROWS", tiles[0])
    monkeypatch.setattr(long_rows, "TILE_KEYS", tiles[1])
    spec = _with_norms(_spec(160, **CASES[case]))
    short, long = pairs.PairStore(spec, long=False), pairs.PairStore(spec, long=True)
    every = (0, 160, 0, short.n_k)
    for region, side in ((every, 32), (every, (1, 41)), (every, (160, 7)), ((17, 150, 5, 101), (40, 33)),
                         ((3, 40, 0, short.n_k), (5, 9))):  # fmt: skip
        for name in short.names:
            if name == "weights":  # streamed already (models.engine.long_rows)
                continue
            signed = name != "weighted_norms"  # as the window draws them
            for head in range(2):
                got = reduce_head(Stage(name, "", "", "", store=long), head, side, region, signed=signed)
                want = reduce_head(Stage(name, "", "", "", store=short), head, side, region, signed=signed)
                _same(got, want, f"{name} {region} {side}")


def test_a_long_stage_is_reduced_from_tiles_of_the_keys_its_rows_see(monkeypatch, one_thread):
    """Work counted: no whole-row block (``on_compute``), every product of Q and K at most one tile,
    and under a causal mask the 'masked' stage computes about half the cells (the keys seen), the
    'scores' all of them."""
    n = 3000
    spec = _spec(n, h=1)
    store = pairs.PairStore(spec, long=True)
    blocks, sizes = [], []
    store.on_compute = lambda *a: blocks.append(a)
    dot = attention.dot_scores

    def counted(q, k, out=None):
        sizes.append(q.shape[-2] * k.shape[-2])
        return dot(q, k, out)

    monkeypatch.setattr(attention, "dot_scores", counted)
    for name, share in (("masked", 0.5), ("scores", 1.0)):
        sizes.clear()
        reduce_head(Stage(name, "", "", "", store=store), 0, 1024, signed=True)
        assert blocks == [], name
        assert max(sizes) <= long_rows.TILE_ROWS * long_rows.TILE_KEYS, name
        diagonal = n * (long_rows.TILE_ROWS + long_rows.TILE_KEYS)  # tiles the diagonal crosses
        assert share * n * n <= sum(sizes) <= share * n * n + diagonal, (name, sum(sizes) / n / n)


def test_a_long_stage_refuses_an_overflow_naming_its_cell(one_thread):
    """A tile's overflow is refused as a block's is, naming the cell (its key counted from 0, not the tile's)."""
    spec = _spec(400, h=1)
    q = spec.q.clone()
    q[0, 350] *= 1e38
    spec = pairs.PairSpec(q=q, k=spec.k, v=spec.v, head_groups=spec.head_groups, variant=spec.variant)
    store = pairs.PairStore(spec, long=True)
    from models.errors import InputError

    for name in ("scores", "masked"):
        with pytest.raises(InputError, match=r"overflows float32 .* at \[0, 350, \d+\]"):
            reduce_head(Stage(name, "", "", "", store=store), 0, 64, signed=True)


assert Variant  # the long rows' specs are built from it
