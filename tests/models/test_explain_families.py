"""Every cell explains itself for every model family: q/k norms, soft-capping, sliding windows,
partial rotary, fused projections (issue 8 on issue 11's families)."""

import numpy as np
import pytest
from test_pretrained_families import FAMILIES, SENTENCE, build

from models.pretrained import load_model
from models.reads.explain import explain
from models.reads.params import pretrained_params

pytest.importorskip("transformers")


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_stage_of_every_family_explains_itself(tmp_path, name):
    build(tmp_path, name)
    model = load_model(tmp_path, device="cpu")
    layer = 1
    trace = model.trace(SENTENCE, layer)
    n = len(trace.query_tokens)
    params = pretrained_params(model, layer, n, trace.config["mask"], trace.config["pad_positions"])
    rng = np.random.default_rng(0)
    for stage in trace.stages:
        shape = stage.shape
        for _ in range(3):
            cell = tuple(int(rng.integers(0, s)) for s in shape)
            d = explain(trace, params, stage.name, cell)
            value = float(stage.array[cell])
            assert d.value == value or (np.isneginf(d.value) and np.isneginf(value)), (stage.name, cell)
            if d.sum_of and np.isfinite(value):
                terms = np.array([t.value for t in d.sum_of], dtype=np.float64)
                tolerance = 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(terms).sum()))
                assert abs(terms.sum() - value) <= tolerance, (stage.name, cell, terms.sum(), value)
