"""The output side of a long input drawn in the window (issue 50, point 1): 'head_output', 'concat' and
'output' are read a band of rows at a time, and a band of 16,384 rows asked the rows' weights at once,
(16,384 × 16,384) a head: ``--stage concat`` at 16,384 tokens failed to allocate 1 GiB under a 3 GB cap.
The weights are asked a store's block of rows at a time, and the rows read so are the stage's own."""

from __future__ import annotations

import numpy as np
import pytest

from models.config import AttentionConfig, AttentionRequest
from models.engine import pairs
from models.engine import reduce as R
from models.engine.long_rows import LongRows
from models.engine.pipeline import run


@pytest.mark.parametrize("name", ["head_output", "concat", "output"])
def test_a_long_output_stage_asks_a_block_of_rows_weights_at_a_time(monkeypatch, name):
    n = 700
    request = AttentionRequest(config=AttentionConfig(heads=2, d_model=8, mask="causal"),
                               sentence=" ".join(f"w{i}" for i in range(n)))  # fmt: skip
    whole = run(request)[name].array  # the whole stage, from the blocks' softmax
    monkeypatch.setattr(pairs, "LONG_CELLS", 100)  # the weights from the rows' statistics
    monkeypatch.setattr(pairs, "BLOCK_BYTES", 64 * 4 * n)  # blocks of 64 rows: a band holds several
    trace = run(request)
    store = trace[name].store if trace[name].store is not None else trace["weights"].store
    assert store.long is not None and store.block_rows == 64
    asked = []
    weights = LongRows.weights

    def spy(self, head, r0, r1, c0, c1):
        asked.append(r1 - r0)
        return weights(self, head, r0, r1, c0, c1)

    monkeypatch.setattr(LongRows, "weights", spy)
    stage = trace[name]
    rows = stage.rows(0, 0, n)
    expected = whole[0] if stage.per_head else whole
    np.testing.assert_allclose(rows, expected, rtol=1e-4, atol=1e-5)
    assert asked and max(asked) <= store.block_rows < n
    asked.clear()
    reduced = R.reduce_heads(stage, list(range(stage.heads)), (1, 246))
    assert reduced[0].peak.shape[0] == 1 and max(asked) <= store.block_rows


@pytest.mark.parametrize("side", [(1024, 1024), (1, 246)], ids=["overview", "strip"])
def test_a_newer_request_stops_a_long_concat_within_a_few_hundred_rows(monkeypatch, side):
    from models.config import Cancelled

    n = 1500
    monkeypatch.setattr(pairs, "LONG_CELLS", 100)
    trace = run(AttentionRequest(config=AttentionConfig(heads=2, d_model=8, mask="causal"),
                                 sentence=" ".join(f"w{i}" for i in range(n))))  # fmt: skip
    stage = trace["concat"]  # (n, 8): one band of the reduction holds every row
    done = []
    weights = LongRows.weights

    def spy(self, head, r0, r1, c0, c1):
        done.append(r1 - r0)
        return weights(self, head, r0, r1, c0, c1)

    monkeypatch.setattr(LongRows, "weights", spy)
    with pytest.raises(Cancelled):
        R.reduce_heads(stage, [0], side, should_stop=lambda: bool(done))  # asked to stop once rows are read
    assert 0 < sum(done) // trace["weights"].heads <= 256 < n, done  # rows of weights per head before it stopped
