"""The atlas' metrics and the detectors' scores run in torch on the model's device (issue 45): equal to
the numpy formulas (models.reads.survey.head_metrics, models.reads.detectors.scores_on) to float64's
rounding, and the weights never cross to the host: one copy of the results per block of texts (and
one for all the detectors' probes), however many heads, layers and batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.engine import host
from models.pretrained import batch_weights, load_model
from models.reads import detectors
from models.reads.atlas import chunk_metrics
from models.reads.atlas_metrics import detector_scores, metrics_tensor
from models.reads.survey import METRIC_NAMES, head_metrics


def _softmax(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64) * 3
    if shape[-1] == shape[-2]:  # causal, so that zeros (0 ln 0) are met too
        x = x.masked_fill(torch.ones(shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(x, -1).float()


@pytest.mark.parametrize("shape", [(3, 4, 9, 9), (2, 5, 7, 11), (2, 3, 1, 1), (1, 2, 1, 4), (40, 64, 64)])
def test_metrics_equal_the_numpy_formulas(device, shape):
    a = _softmax(*shape)
    want = head_metrics(a.numpy())
    got = metrics_tensor(a.to(device))
    assert got.device.type == device and got.shape == (len(METRIC_NAMES), *shape[:-2])
    for i, name in enumerate(METRIC_NAMES):
        np.testing.assert_allclose(host.to_numpy(got[i]), want[name], rtol=1e-12, atol=1e-15, err_msg=name)


def test_detector_scores_equal_the_numpy_formulas(device):
    probes = detectors.make_probes(range(100, 300), prefix=(1,), body=24)
    for i, probe in enumerate(probes):
        n = len(probe.ids)
        a = _softmax(3, n, n, seed=i)
        want = detectors.scores_on(probe.kind, a.numpy(), probe)
        patterns = {k: make(probe.ids) for k, (kind, make) in detectors.PATTERNS.items() if kind == probe.kind}
        got = detector_scores(probe.kind, a.to(device), probe, patterns)
        assert set(got) == set(want) == set(detectors.detectors_on(probe.kind))
        for name in want:
            np.testing.assert_allclose(host.to_numpy(got[name]), want[name], rtol=1e-12, atol=1e-15)


@pytest.fixture
def copies(monkeypatch) -> list[tuple[int, ...]]:
    """The shape of every tensor handed to the host while the atlas reads weights."""
    seen: list[tuple[int, ...]] = []
    real = host.to_numpy

    def counted(t, dtype=None):
        seen.append(tuple(t.shape))
        return real(t, dtype)

    monkeypatch.setattr(host, "to_numpy", counted)
    monkeypatch.setattr(batch_weights, "to_numpy", counted)
    return seen


TEXTS = ["the cat sat on the mat", "a dog sat on the mat", "the cat sat", "a dog ran", "hello world",
         "the dog sat on the cat while the bird sang"]  # fmt: skip


def test_a_block_of_texts_crosses_to_the_host_once(device, copies):
    model = load_model("minilm", device=device)
    encs = [model.encode(t, model.max_positions) for t in TEXTS]
    copies.clear()
    got, batches = chunk_metrics(model, encs)
    shape = (len(METRIC_NAMES), len(TEXTS), model.num_layers, model.num_heads)
    assert batches > 1 and copies == [shape]  # not one per batch, layer or head
    for i, text in enumerate(TEXTS):  # the numpy formulas on each text's own weights
        want = head_metrics(model.layer_weights(text)[1])
        for name in METRIC_NAMES:
            np.testing.assert_allclose(got[name][i], want[name], rtol=0, atol=1e-6, err_msg=name)


def test_the_detectors_cross_to_the_host_once(device, copies):
    model = load_model("minilm", device=device)
    copies.clear()
    got = detectors.detect(model)
    assert copies == [(len(detectors.DETECTORS), model.num_layers, model.num_heads)]
    want = detectors.detect(model, weights_of=lambda probe: model.layer_weights(model.encode_ids(probe.ids))[1])
    for name in detectors.DETECTORS:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-6, equal_nan=True, err_msg=name)
