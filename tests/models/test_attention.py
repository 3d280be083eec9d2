"""The maths against PyTorch's own attention, the formulas of the notes and direct references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from engine_refs import make_mha, mha_to_weights, run_mha
from hypothesis import given, settings
from hypothesis import strategies as st

import models.engine.attention as att
from models.config import AttentionConfig, AttentionRequest
from models.engine.pairs import MaskSpec
from models.engine.pipeline import run
from models.engine.weights import random_weights

TOL = dict(atol=1e-5, rtol=1e-5)


def _matrix(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    return rng.standard_normal((n, d)).astype(np.float32)


# --- equality with torch.nn.MultiheadAttention ---------------------------------------------------


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
@pytest.mark.parametrize("causal", [False, True], ids=["no-mask", "causal"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_output_and_weights_equal_nn_multihead_attention(heads, causal, cross):
    d_model, n_k, n_q = 32, 7, (5 if cross else 7)
    rng = np.random.default_rng(heads * 10 + causal)
    x_k = _matrix(rng, n_k, d_model)
    x_q = _matrix(rng, n_q, d_model) if cross else x_k
    mha = make_mha(d_model, heads, seed=heads)
    cfg = AttentionConfig(heads=heads, d_model=d_model, mask="causal" if causal else "none", score="scaled")
    req = AttentionRequest(
        config=cfg, embeddings=x_k, cross_embeddings=x_q if cross else None, weights=mha_to_weights(mha)
    )
    trace = run(req)

    out_mean, weights_mean = run_mha(mha, x_q, x_k, causal, average=True)
    out_heads, weights_heads = run_mha(mha, x_q, x_k, causal, average=False)
    np.testing.assert_allclose(out_heads, out_mean, **TOL)
    ours = trace["weights"].array
    assert ours.shape == (heads, n_q, n_k)
    np.testing.assert_allclose(trace["output"].array, out_mean, **TOL)
    np.testing.assert_allclose(ours.mean(axis=0), weights_mean, **TOL)
    np.testing.assert_allclose(ours, weights_heads, **TOL)
    if causal:
        assert np.all(ours[:, np.triu(np.ones((n_q, n_k), dtype=bool), 1)] == 0.0)


# --- scaled dot product equals F.scaled_dot_product_attention ------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["no-mask", "causal"])
@pytest.mark.parametrize("heads,d_model", [(1, 8), (4, 32)])
def test_scaled_weights_and_head_outputs_equal_scaled_dot_product_attention(causal, heads, d_model):
    cfg = AttentionConfig(heads=heads, d_model=d_model, mask="causal" if causal else "none", bias=True, seed=3)
    trace = run(AttentionRequest(config=cfg, sentence="the quick brown fox jumps over the lazy dog"))
    q, k, v = (torch.from_numpy(trace[name].array) for name in ("q", "k", "v"))
    n = k.shape[1]
    identity = torch.eye(n).expand(heads, n, n)  # V = I turns the output into the weights
    sdpa_weights = F.scaled_dot_product_attention(q, k, identity, is_causal=causal)
    sdpa_out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    np.testing.assert_allclose(trace["weights"].array, sdpa_weights.numpy(), **TOL)
    np.testing.assert_allclose(trace["head_output"].array, sdpa_out.numpy(), **TOL)


def test_rectangular_causal_mask_matches_sdpa_top_left_alignment():
    rng = np.random.default_rng(0)
    cfg = AttentionConfig(heads=2, d_model=8, mask="causal")
    trace = run(AttentionRequest(config=cfg, embeddings=_matrix(rng, 6, 8), cross_embeddings=_matrix(rng, 4, 8)))
    q, k, v = (torch.from_numpy(trace[name].array) for name in ("q", "k", "v"))
    expected = F.scaled_dot_product_attention(q, k, torch.eye(6).expand(2, 6, 6), is_causal=True)
    np.testing.assert_allclose(trace["weights"].array, expected.numpy(), **TOL)


# --- softmax and masks ----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    heads=st.sampled_from([1, 2, 4]),
    n=st.integers(1, 9),
    score=st.sampled_from(["dot", "scaled", "additive", "general"]),
    mask=st.sampled_from(["none", "causal"]),
    temperature=st.sampled_from([0.25, 1.0, 3.0]),
    seed=st.integers(0, 10_000),
)
def test_softmax_rows_sum_to_one_and_causal_weights_are_exactly_zero_above_the_diagonal(
    heads, n, score, mask, temperature, seed
):
    rng = np.random.default_rng(seed)
    cfg = AttentionConfig(heads=heads, d_model=8, score=score, mask=mask, temperature=temperature, seed=seed)
    a = run(AttentionRequest(config=cfg, embeddings=3 * _matrix(rng, n, 8)))["weights"].array
    assert np.all(np.isfinite(a)) and np.all(a >= 0)
    np.testing.assert_allclose(a.sum(axis=-1), 1.0, atol=1e-5)
    if mask == "causal":
        upper = np.triu(np.ones((n, n), dtype=bool), 1)
        assert np.all(a[:, upper] == 0.0)  # (visible weights may underflow to 0 at low temperature)


def test_padding_mask_gives_exact_zero_columns_and_other_columns_sum_to_one():
    cfg = AttentionConfig(heads=2, d_model=8, mask="padding", pad_positions=(1, 3))
    trace = run(AttentionRequest(config=cfg, sentence="one two three four five"))
    a = trace["weights"].array
    assert np.all(a[:, :, [1, 3]] == 0.0)
    np.testing.assert_allclose(a.sum(axis=-1), 1.0, atol=1e-6)
    assert np.all(np.isneginf(trace["masked"].array[:, :, [1, 3]]))


def test_padding_mask_hiding_every_key_gives_zero_rows_without_nan():
    cfg = AttentionConfig(heads=2, d_model=8, mask="padding", pad_positions=(0, 1, 2), bias=True)
    trace = run(AttentionRequest(config=cfg, sentence="one two three"))
    for name in ("weights", "head_output", "concat"):
        arr = trace[name].array
        assert not np.any(np.isnan(arr)), name
        assert np.all(arr == 0.0), name
    # Only the output bias remains: Y = 0 · W_O + b_O.
    b_o = random_weights(cfg).b_o
    np.testing.assert_allclose(trace["output"].array, np.broadcast_to(b_o, (3, 8)), atol=1e-7)


def test_custom_mask_row_hiding_every_key_is_zero_and_other_rows_sum_to_one():
    hidden = np.zeros((4, 4), dtype=bool)
    hidden[2] = True  # query 2 sees nothing
    hidden[0, 3] = True
    cfg = AttentionConfig(heads=4, d_model=16, mask="custom", bias=True)
    trace = run(AttentionRequest(config=cfg, sentence="a b c d", custom_mask=hidden))
    a, o = trace["weights"].array, trace["head_output"].array
    assert not np.any(np.isnan(a)) and not np.any(np.isnan(o))
    assert np.all(a[:, 2] == 0.0) and np.all(o[:, 2] == 0.0)
    assert np.all(a[:, 0, 3] == 0.0)
    np.testing.assert_allclose(a[:, [0, 1, 3]].sum(axis=-1), 1.0, atol=1e-6)


def test_softmax_function_fully_masked_rows_and_large_scores_stay_finite():
    s = torch.tensor([[[1e30, 0.0, -1e30], [float("-inf")] * 3, [5.0, float("-inf"), 5.0]]])
    a = att.softmax(s)
    assert torch.isfinite(a).all()
    torch.testing.assert_close(a[0, 0], torch.tensor([1.0, 0.0, 0.0]))
    assert torch.equal(a[0, 1], torch.zeros(3))
    torch.testing.assert_close(a[0, 2], torch.tensor([0.5, 0.0, 0.5]))


def test_temperature_divides_the_scores_before_softmax():
    base = AttentionConfig(heads=2, d_model=8, seed=5)
    hot = run(AttentionRequest(config=base.replace(temperature=2.5), sentence="a b c d e"))
    cold = run(AttentionRequest(config=base, sentence="a b c d e"))
    s = hot["scaled"].array.astype(np.float64)
    np.testing.assert_allclose(hot["scaled"].array, cold["scaled"].array)  # T does not change scores
    expected = np.exp(s / 2.5) / np.exp(s / 2.5).sum(-1, keepdims=True)
    np.testing.assert_allclose(hot["weights"].array, expected, atol=1e-6)
    entropy = lambda a: -(a * np.log(a)).sum(-1)
    assert np.all(entropy(hot["weights"].array) > entropy(cold["weights"].array))


# --- score functions ------------------------------------------------------------------------------


def test_dot_and_scaled_scores_differ_by_exactly_sqrt_d_k():
    cfg = AttentionConfig(heads=2, d_model=16, d_k=9, seed=2)
    dot = run(AttentionRequest(config=cfg.replace(score="dot"), sentence="the cat sat on the mat"))
    scaled = run(AttentionRequest(config=cfg, sentence="the cat sat on the mat"))
    assert "scaled" not in dot and "scaled" in scaled
    np.testing.assert_array_equal(dot["scores"].array, scaled["scores"].array)
    np.testing.assert_allclose(scaled["scaled"].array * 3.0, dot["scores"].array, rtol=1e-6)  # √9 = 3
    np.testing.assert_allclose(dot["weights"].array, _softmax(dot["scores"].array), atol=1e-6)
    np.testing.assert_allclose(scaled["weights"].array, _softmax(dot["scores"].array / 3.0), atol=1e-6)


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s.astype(np.float64) - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _additive_reference(q, k, w1, w2, w) -> np.ndarray:
    h, n_q, _ = q.shape
    n_k = k.shape[1]
    out = np.zeros((h, n_q, n_k))
    for head in range(h):
        for i in range(n_q):
            for j in range(n_k):
                hidden = np.tanh(q[head, i] @ w1[head] + k[head, j] @ w2[head])
                out[head, i, j] = w[head] @ hidden
    return out


def test_additive_scores_equal_a_loop_reference():
    cfg = AttentionConfig(heads=2, d_model=6, d_k=3, score="additive", seed=4)
    trace = run(AttentionRequest(config=cfg, sentence="red green blue cyan"))
    extra = {k: v.astype(np.float64) for k, v in random_weights(cfg).extra.items()}
    q, k = trace["q"].array.astype(np.float64), trace["k"].array.astype(np.float64)
    expected = _additive_reference(q, k, extra["W_1"], extra["W_2"], extra["w"])
    np.testing.assert_allclose(trace["scores"].array, expected, atol=1e-6)
    assert "scaled" not in trace


@pytest.mark.parametrize("chunk_elements", [1, 2 * 5 * 3 * 3, 10**9], ids=["row-by-row", "3-rows", "one-chunk"])
def test_additive_scores_are_the_same_whatever_the_chunk_size(monkeypatch, chunk_elements):
    gen = torch.Generator().manual_seed(0)
    h, n_q, n_k, d = 2, 7, 5, 3
    q, k = torch.randn(h, n_q, d, generator=gen), torch.randn(h, n_k, d, generator=gen)
    w1, w2 = torch.randn(h, d, d, generator=gen), torch.randn(h, d, d, generator=gen)
    w = torch.randn(h, d, generator=gen)
    monkeypatch.setattr(att, "_ADDITIVE_CHUNK_ELEMENTS", chunk_elements)
    got = att.additive_scores(q, k, w1, w2, w)
    expected = _additive_reference(*(t.double().numpy() for t in (q, k, w1, w2, w)))
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-5)


def test_general_scores_equal_q_w_k_transposed():
    cfg = AttentionConfig(heads=3, d_model=12, score="general", seed=8)
    trace = run(AttentionRequest(config=cfg, sentence="to be or not to be"))
    w_g = random_weights(cfg).extra["W_g"].astype(np.float64)
    q, k = trace["q"].array.astype(np.float64), trace["k"].array.astype(np.float64)
    np.testing.assert_allclose(trace["scores"].array, q @ w_g @ k.transpose(0, 2, 1), atol=1e-6)


# --- sinusoidal positional encoding ----------------------------------------------------------------


def _sinusoidal_reference(n: int, d: int) -> np.ndarray:
    p = np.zeros((n, d))
    for i in range(n):
        for c in range(d):
            two_j = c - c % 2
            angle = i / 10000 ** (two_j / d)
            p[i, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return p


@pytest.mark.parametrize("d", [1, 2, 7, 16, 33])
def test_sinusoidal_encoding_matches_the_formula_including_odd_d_model(d):
    got = att.sinusoidal_encoding(60, d)
    assert got.dtype == torch.float64 and got.shape == (60, d)
    np.testing.assert_allclose(got.numpy(), _sinusoidal_reference(60, d), rtol=0, atol=1e-12)


def test_positional_encoding_stage_is_the_float32_rounding_and_is_added_to_the_input():
    cfg = AttentionConfig(heads=1, d_model=7, pe="sinusoidal")
    trace = run(AttentionRequest(config=cfg, sentence="one two three four five six"))
    p = trace["positional_encoding"].array
    np.testing.assert_allclose(p, _sinusoidal_reference(6, 7), rtol=0, atol=6e-8)
    np.testing.assert_allclose(trace["input"].array, trace["embeddings"].array + p, rtol=0, atol=1e-6)


def test_sinusoidal_encoding_shifts_are_rotations_independent_of_position():
    n, d = 200, 16
    p = att.sinusoidal_encoding(n, d).numpy()
    for j in range(d // 2):
        omega = 1.0 / 10000 ** (2 * j / d)
        for delta in (1, 5, 37):
            theta = delta * omega
            rot = np.array([[math.cos(theta), math.sin(theta)], [-math.sin(theta), math.cos(theta)]])
            pairs = p[:, 2 * j : 2 * j + 2]  # (n, 2): (sin, cos) at every position i
            np.testing.assert_allclose(pairs[:-delta] @ rot.T, pairs[delta:], atol=1e-9)


# --- building blocks ------------------------------------------------------------------------------


def test_concat_heads_places_heads_side_by_side():
    o = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    c = att.concat_heads(o)
    assert c.shape == (3, 8)
    assert torch.equal(c[:, :4], o[0]) and torch.equal(c[:, 4:], o[1])


def test_the_one_mask_builder_marks_hidden_keys():
    causal = MaskSpec(causal=True).rows(0, 3, 4, torch.device("cpu"))
    assert torch.equal(causal, torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]]).bool())
    pad = MaskSpec(pads=(0, 2)).rows(0, 2, 4, torch.device("cpu"))
    assert torch.equal(pad, torch.tensor([[1, 0, 1, 0], [1, 0, 1, 0]]).bool())
    window = MaskSpec(causal=True, window=2).rows(0, 4, 4, torch.device("cpu"))  # sees i-1 and i
    assert torch.equal(window, torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]]).bool())
    assert MaskSpec().rows(0, 2, 2, torch.device("cpu")) is None


def test_eager_softmax_is_the_same_with_and_without_an_all_hidden_row():
    """``eager`` only skips the pass that zeroes all-hidden rows when there is none."""
    scores = torch.randn(2, 5, 7)
    for hidden_row in (None, 3):
        s = scores.clone()
        if hidden_row is not None:
            s[1, hidden_row] = float("-inf")
        lazy, eager = att.softmax(s.clone(), 0.7), att.softmax(s.clone(), 0.7, eager=True)
        torch.testing.assert_close(eager, lazy, rtol=0, atol=0)
        assert not torch.isnan(eager).any()
        if hidden_row is not None:
            assert (eager[1, hidden_row] == 0).all()
