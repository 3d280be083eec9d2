"""The structure drawn over a long input's weights (issue 34, models/engine/long_structure.py): the band's
edges lie on the mask's own boundary, row by row; each row's weight on key 0 (and on a learned sink) is the
weights' own column where the row's statistics are known, and NaN (not drawn) before the overview reaches it."""

import numpy as np
import pytest
import torch

from models.engine import pairs
from models.engine.attend import Variant
from models.engine.long_structure import long_structure
from models.engine.masks import MaskSpec
from models.engine.trace import Stage


def _store(mask, sinks=False, n=60):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, n, 8, generator=g) for _ in range(3))
    variant = Variant(scale=8**0.5, divide=True, sinks=torch.tensor([0.5, -1.0]) if sinks else None).with_mask(mask)
    spec = pairs.PairSpec(q=q, k=k, v=v, head_groups=(0, 1), variant=variant)
    return pairs.PairStore(spec, long=True)


def _x_at(segment, y):
    (x0, y0), (x1, y1) = segment
    return x0 + (x1 - x0) * (y - y0) / (y1 - y0)


@pytest.mark.parametrize("mask", [MaskSpec(causal=True, window=7), MaskSpec(band=5)], ids=["window", "band"])
def test_the_edges_lie_on_the_masks_boundary_row_by_row(mask):
    store = _store(mask)
    drawn = long_structure(Stage("weights", "", "", "", store=store))
    edges = drawn.edges()
    assert len(edges) == (1 if mask.window else 2)
    for i in range(store.n_q):
        c0, c1 = mask.visible_columns(i, i + 1, store.n_keys)  # the keys row i sees
        (y0, y1) = edges[0][0][1], edges[0][1][1]
        if y0 <= i <= y1:  # the left edge: at the top of row i, the first key it sees
            assert _x_at(edges[0], i) == pytest.approx(c0)
        else:
            assert c0 == 0  # above the edge's start every key up to the row is seen
        if mask.band is not None and i <= edges[1][1][1]:  # the right edge: just after the last key row i sees
            assert _x_at(edges[1], i) == pytest.approx(c1)


def test_the_first_keys_and_the_sinks_share_are_the_weights_own_columns_where_known():
    store = _store(MaskSpec(causal=True, window=15), sinks=True)
    stage = Stage("weights", "", "", "", store=store)
    drawn = long_structure(stage)
    assert np.isnan(drawn.first_key).all() and np.isnan(drawn.sink_share).all()  # no row's statistics yet
    assert drawn.window == 15 and drawn.sinks.tolist() == [0.5, -1.0]
    store.region("weights", 1, 10, 30, 0, 4)  # rows 10..29 of head 1 looked at: their statistics learned
    drawn = long_structure(stage)
    weights = store.region("weights", 1, 0, store.n_q, 0, store.n_k)  # (n, n + 1): every row of head 1
    first, sink = drawn.first_key[1], drawn.sink_share[1]
    np.testing.assert_allclose(first[10:30], weights[10:30, 0], rtol=1e-6, atol=0)
    np.testing.assert_allclose(sink[10:30], weights[10:30, -1], rtol=1e-6)
    assert np.isnan(first[:10]).all() and np.isnan(drawn.first_key[0]).all()  # head 0 never looked at
    assert (first[15:30] == 0).all() and (first[10:15] > 0).all()  # key 0 leaves the window after row 14
    assert long_structure(Stage("scores", "", "", "", store=store)) is None
