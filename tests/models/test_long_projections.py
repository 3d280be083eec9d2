"""Long inputs (issue 34): the toy projects Q, K and V head by head when first read, so that the first
rows of the first head need that head's Q and K alone (they took every head's, 5–13 s at 131,072
tokens, before anything was on screen); the numbers are those of the eager projection; the row
statistics merged over blocks of keys equal a float64 softmax at any temperature."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine import attend
from models.engine import attention as att
from models.engine.pipeline import run
from models.engine.projections import HeadProjections
from models.engine.weights import random_weights

N = 11600  # just past the lazy store's long threshold (2**27 cells a head)


def _long_trace(monkeypatch=None, calls=None):
    if monkeypatch is not None:
        project = att.project
        monkeypatch.setattr(att, "project", lambda x, w, b: calls.append(w.shape[0]) or project(x, w, b))
    sentence = " ".join(f"w{i % 997}" for i in range(N))
    cfg = AttentionConfig(heads=3, d_model=12, mask="causal", max_tokens=N)
    return run(AttentionRequest(config=cfg, sentence=sentence)), cfg


def test_the_first_rows_of_head_0_need_only_its_q_and_k(monkeypatch):
    calls: list[int] = []
    trace, _ = _long_trace(monkeypatch, calls)
    store = trace["weights"].store
    assert store.long is not None and trace["q"].lazy and calls == []  # nothing projected by the run
    store.region("weights", 0, 0, 64, 0, 64)
    assert calls == [1, 1]  # head 0's q and k, one head each, and nothing else
    store.region("weights", 0, N - 5, N, 0, N)
    assert calls == [1, 1]  # projected once


def test_lazily_projected_q_k_v_are_the_projection_and_the_weights_a_softmax():
    trace, cfg = _long_trace()
    w = random_weights(cfg)
    x = torch.from_numpy(trace["input"].array)
    for name, (weight, bias) in {"q": (w.W_q, w.b_q), "k": (w.W_k, w.b_k), "v": (w.W_v, w.b_v)}.items():
        want = att.project(x, torch.as_tensor(weight), None if bias is None else torch.as_tensor(bias)).numpy()
        np.testing.assert_allclose(trace[name].array, want, rtol=1e-6, atol=1e-6)
    store = trace["weights"].store
    rows = store.rows("weights", 2, N - 3, N)  # whole rows of the last head
    q, k = trace["q"].array[2, N - 3 :].astype(np.float64), trace["k"].array[2].astype(np.float64)
    s = q @ k.T / np.sqrt(q.shape[-1])
    s[np.arange(3)[:, None] < np.arange(N)[None, :] - (N - 3)] = -np.inf
    want = np.exp(s - s.max(1, keepdims=True))
    np.testing.assert_allclose(rows, want / want.sum(1, keepdims=True), rtol=2e-5, atol=1e-9)


def test_a_projection_that_overflows_is_refused_when_read():
    x = torch.full((4, 2), 3e38)
    w = torch.ones(1, 2, 2)
    p = HeadProjections(x, x, {"q": (w, None), "k": (w, None), "v": (w, None)}, largest=3e38)
    with pytest.raises(InputError, match="stage 'q' overflows float32"):
        p.ready(0)


@pytest.mark.parametrize("temperature", [1.0, 0.3, 7.0])
def test_row_statistics_merged_over_blocks_of_keys_are_the_softmax(temperature):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 40, generator=g) * 6
    x[1, 10:] = float("-inf")  # a row whose later blocks see nothing
    x[2] = float("-inf")  # a dead row
    parts = [attend.row_statistics(x[:, a : a + 16], temperature) for a in range(0, 40, 16)]
    m, lse = attend.merge_statistics(torch.stack([p[0] for p in parts], -1), torch.stack([p[1] for p in parts], -1),
                                     temperature)  # fmt: skip
    got = torch.exp(attend.log_weights(x, m, lse, temperature))
    want = torch.softmax(x.double() / temperature, dim=-1).nan_to_num(0.0)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-9)
    assert float(got[2].abs().max()) == 0.0
