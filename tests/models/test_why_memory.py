"""``why --row`` at long inputs (issue 50, point 11): the cell's split picked its key from an identity
matrix of every visible key, ``np.eye(n)``: at 26,000 keys 5 GiB of float64 for one column ("not enough
memory" under a 6 GB cap; 3.4 GB peaks). The split of a cell with its row holds O(n · d), never n × n."""

from __future__ import annotations

import tracemalloc

import numpy as np

from models.config import AttentionConfig, AttentionRequest
from models.engine.pipeline import run
from models.reads.params import toy_params
from models.reads.why import why


def test_a_cell_split_with_its_row_of_3000_keys_never_holds_an_n_by_n_matrix():
    n = 3000
    request = AttentionRequest(config=AttentionConfig(heads=1, d_model=8, mask="causal"),
                               sentence=" ".join(f"w{i}" for i in range(n)))  # fmt: skip
    trace, params = run(request), toy_params(request)
    row, col = n - 1, 7
    tracemalloc.start()
    try:
        result = why(trace, 0, row, col, params=params, with_row=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < n * n * 8 / 4, f"{peak / 2**20:.0f} MiB held (an n × n float64 matrix is {n * n * 8 / 2**20:.0f})"
    assert result["row_split"]["head"] == 0 and np.isfinite(result["score"])
    np.testing.assert_allclose(result["total"], result["score"], rtol=1e-4, atol=1e-5)
