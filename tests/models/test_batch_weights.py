"""Texts of one length run as one batch (models/pretrained/batch_weights.py): every layer's weights
equal those of ``layer_weights`` run text by text (MiniLM, a random GPT-2, a random LLaMA with
grouped-query heads), groups really hold several texts, a family vmap cannot run falls back to one
text at a time with the same numbers, ``should_stop`` cancels, and batches stay within their bytes."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from models.config import Cancelled
from models.pretrained import load_model
from models.pretrained.batch_weights import (
    BATCH_BYTES,
    MAX_BATCH,
    batch_layer_weights,
    batch_size,
    batches_of,
    runs_batched,
)
from models.pretrained.batch_weights import text_bytes as one_text_bytes

pytest.importorskip("transformers")
from test_survey import build  # noqa: E402

TEXTS = ["the cat sat on the mat", "a dog sat on the mat", "the cat sat", "hello world", "a dog ran",
         "the park was green and the dogs ran", "cats", "a bird", "the dog sat on the cat", "world hello"]  # fmt: skip


def batched(model, encs, **kw) -> tuple[dict, int]:
    got: dict[tuple[int, int], np.ndarray] = {}

    def on_weights(layer, indices, weights):
        assert weights.shape[0] == len(indices) and weights.dtype == np.float32
        for i, a in zip(indices, weights, strict=True):
            got[i, layer] = a.copy()

    return got, batch_layer_weights(model, encs, on_weights, **kw)


@pytest.fixture(scope="module")
def minilm():
    return load_model("minilm", device="cpu")


@pytest.mark.parametrize("family", ["minilm", "gpt2", "llama"])
def test_batched_equals_text_by_text(tmp_path, minilm, family):
    model = minilm if family == "minilm" else load_model(str(build(tmp_path, family)[0]), device="cpu")
    encs = [model.encode(t) for t in TEXTS]
    lengths = [len(e.ids) for e in encs]
    assert len(set(lengths)) < len(lengths)  # some texts share a length: real batches
    got, count = batched(model, encs)
    assert count == len(set(lengths))  # one batch per length
    assert runs_batched(model.arch)  # under vmap: never fell back to one text at a time
    for i, enc in enumerate(encs):
        _, want, _ = model.layer_weights(enc)
        for layer in range(model.num_layers):
            np.testing.assert_allclose(got[i, layer], want[layer], atol=1e-6, rtol=0, err_msg=f"text {i} L{layer}")


def test_a_family_vmap_cannot_run_goes_one_text_at_a_time(minilm, monkeypatch):
    import models.pretrained.batch_weights as bw

    arch = minilm.arch
    real = type(arch).block

    def branching(self, i, h, *rest):  # data-dependent control flow, as MoE routing has
        if bool(h.abs().sum() >= 0):
            return real(self, i, h, *rest)
        raise AssertionError

    monkeypatch.setattr(type(arch), "block", branching)
    monkeypatch.setattr(bw, "_ONE_BY_ONE", weakref.WeakSet())  # a fresh record of fallbacks
    encs = [minilm.encode(t) for t in TEXTS[:3]]
    got, _ = batched(minilm, encs)
    assert not runs_batched(arch)
    for i, enc in enumerate(encs):
        _, want, _ = minilm.layer_weights(enc)
        for layer in range(minilm.num_layers):
            np.testing.assert_array_equal(got[i, layer], want[layer])


def test_should_stop_cancels_between_batches(minilm):
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 4

    with pytest.raises(Cancelled):
        batched(minilm, [minilm.encode(t) for t in TEXTS], should_stop=stop)


def test_batches_group_by_length_and_stay_within_their_bytes(minilm):
    arch = minilm.arch
    encs = [minilm.encode("word " * k) for k in [3, 5, 3, 3, 5, 200, 200]]
    groups = batches_of(encs, arch)
    assert [[len(encs[i].ids) for i in g] for g in groups] == [[5, 5, 5], [7, 7], [202, 202]]
    assert sorted(i for g in groups for i in g) == list(range(len(encs)))
    for n in (8, 128, 512):
        size = batch_size(arch, n)
        assert 1 <= size <= MAX_BATCH and (size == 1 or size * one_text_bytes(arch, n) <= BATCH_BYTES)
    assert batch_size(arch, 512) < MAX_BATCH  # long texts: smaller batches
    many = [minilm.encode("word " * 3)] * (MAX_BATCH + 5)
    assert [len(g) for g in batches_of(many, arch)] == [MAX_BATCH, 5]
