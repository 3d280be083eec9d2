"""``explain`` of an output-side cell at long inputs (issue 50, point 10): one query's head output,
concatenation and output need that query's row of weights, not every row. Counted (the weights' rows
computed per head), not timed; the value equals the whole stage's."""

from __future__ import annotations

import numpy as np
import pytest

from models import api
from models.engine import long_rows, pairs
from tests.models.test_reduce_strips import distinct_words

N = 600


@pytest.fixture
def counted(monkeypatch):
    """A long store (the weights from the rows' statistics) at N tokens, and the weights' rows each
    read computes: the statistics' passes, the weights made from them, whole blocks."""
    monkeypatch.setattr(pairs, "LONG_CELLS", 100)
    rows = []
    passes, weights, compute = long_rows.LongRows._pass, long_rows.LongRows.weights, pairs.PairStore._compute

    def spy_pass(self, head, s, e, *args):
        rows.append(e - s)
        return passes(self, head, s, e, *args)

    def spy_weights(self, head, r0, r1, c0, c1, scratch=None):
        rows.append(r1 - r0)
        return weights(self, head, r0, r1, c0, c1, scratch)

    def spy_compute(self, name, head, block):
        rows.append(self.block_rows)
        return compute(self, name, head, block)

    monkeypatch.setattr(long_rows.LongRows, "_pass", spy_pass)
    monkeypatch.setattr(long_rows.LongRows, "weights", spy_weights)
    monkeypatch.setattr(pairs.PairStore, "_compute", spy_compute)
    return rows


@pytest.mark.parametrize(("stage", "cell"), [("head_output", (1, N - 1, 3)), ("concat", (N - 1, 5)),
                                             ("output", (N - 1, 5))])  # fmt: skip
def test_one_output_cell_computes_one_row_of_weights_per_head(counted, stage, cell):
    heads = 2
    trace = api.toy(distinct_words(N), heads=heads, d_model=8, mask="causal")
    assert trace.raw["weights"].store.long is not None
    got = trace.explain(stage, cell)
    # one row at a time, a few reads of it per head (before: every row of every head, 600 × 2)
    assert counted and max(counted) == 1 and sum(counted) <= 4 * heads, counted
    whole = api.toy(distinct_words(N), heads=heads, d_model=8, mask="causal").raw[stage].array
    np.testing.assert_allclose(got["value"], whole[cell], rtol=1e-5, atol=1e-6)
    total = sum(t["value"] for t in got["sum_of"])
    np.testing.assert_allclose(total, got["value"], rtol=1e-5, atol=1e-6)
