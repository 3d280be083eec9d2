"""The pipeline end to end: sizes, seeds, cross-attention, permutation behaviour, device, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from engine_refs import reference_output
from hypothesis import given, settings
from hypothesis import strategies as st

import models.engine.device as device_mod
from models.config import AttentionConfig, AttentionRequest, Cancelled, InputError
from models.engine.pipeline import run
from models.engine.tokenize import tokenize, word_vector
from models.engine.trace import STAGE_ORDER
from models.engine.weights import random_weights


def _matrix(seed: int, n: int, d: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


# --- sizes ----------------------------------------------------------------------------------------


def test_d_v_different_from_d_k_works_end_to_end_with_the_notes_example():
    cfg = AttentionConfig(heads=2, d_model=16, d_k=24, d_v=28, bias=True, seed=1)
    trace = run(AttentionRequest(config=cfg, sentence="the cat sat on the mat"))
    n = 6
    shapes = {s.name: s.shape for s in trace.stages}
    assert shapes["q"] == shapes["k"] == (2, n, 24)
    assert shapes["v"] == (2, n, 28)
    assert shapes["scores"] == shapes["scaled"] == shapes["weights"] == (2, n, n)
    assert shapes["head_output"] == (2, n, 28)
    assert shapes["concat"] == (n, 56)
    assert shapes["output"] == (n, 16)
    assert "(6×24)·(24×6) → 6×6" in trace["scaled"].shapes
    expected = reference_output(trace["input"].array, trace["input"].array, random_weights(cfg))
    for name in ("q", "v", "weights", "head_output", "concat", "output"):
        np.testing.assert_allclose(trace[name].array, expected[name], atol=1e-5, err_msg=name)


def test_d_out_sets_the_output_width():
    trace = run(AttentionRequest(config=AttentionConfig(heads=2, d_model=8, d_out=5), sentence="a b c"))
    assert trace["output"].shape == (3, 5)
    assert trace.config["d_out"] == 5


def test_stages_follow_the_canonical_order_and_labels_match_the_axes():
    cfg = AttentionConfig(heads=2, d_model=8, mask="causal", pe="sinusoidal")
    trace = run(AttentionRequest(config=cfg, sentence="a b c", cross_sentence="x y"))
    positions = [STAGE_ORDER.index(n) for n in trace.names]
    assert positions == sorted(positions)
    for stage in trace.stages:
        assert stage.array.dtype == np.float32
        assert (len(stage.row_labels), len(stage.col_labels)) == stage.shape[-2:], stage.name
    assert trace["weights"].row_labels == ("x", "y") and trace["weights"].col_labels == ("a", "b", "c")


# --- seeds and embeddings -------------------------------------------------------------------------


def test_same_seed_reproduces_every_stage_and_different_seeds_differ():
    cfg = AttentionConfig(heads=2, d_model=8, bias=True, seed=11)
    first = run(AttentionRequest(config=cfg, sentence="one two three"))
    again = run(AttentionRequest(config=cfg, sentence="one two three"))
    other = run(AttentionRequest(config=cfg.replace(seed=12), sentence="one two three"))
    for name in first.names:
        np.testing.assert_array_equal(first[name].array, again[name].array)
    assert not np.allclose(first["embeddings"].array, other["embeddings"].array)
    assert not np.allclose(first["q"].array, other["q"].array)
    assert not np.allclose(first["output"].array, other["output"].array)


def test_running_the_pipeline_does_not_disturb_the_global_torch_rng():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    run(AttentionRequest(config=AttentionConfig(seed=5), sentence="a b"))
    assert torch.equal(torch.rand(3), expected)


def test_sentence_embeddings_are_each_words_own_seeded_vector():
    sentence = "the cat sat on the mat"
    cfg = AttentionConfig(heads=2, d_model=8, seed=7)
    trace = run(AttentionRequest(config=cfg, sentence=sentence))
    tokens = tokenize(sentence)
    expected = np.stack([word_vector(t, 8, 7) for t in tokens])
    np.testing.assert_array_equal(trace["embeddings"].array, expected)
    assert trace.key_tokens == tuple(tokens)
    # drawn as nn.Embedding draws its rows: N(0, 1), float32
    many = np.stack([word_vector(f"w{i}", 64, 0) for i in range(500)])
    assert many.dtype == np.float32 and abs(many.mean()) < 0.02 and abs(many.std() - 1) < 0.02


def test_a_words_embedding_depends_on_the_word_and_the_seed_only():
    """Issue 35, item 18: the vocabulary was the sentence's sorted words, so "cat"'s vector changed
    when a word was added before it: "change one word and see" changed every word."""
    def vectors(sentence, seed=0, d_model=8):
        trace = run(AttentionRequest(config=AttentionConfig(heads=2, d_model=d_model, seed=seed), sentence=sentence))
        return dict(zip(trace.key_tokens, trace["embeddings"].array))

    one, other = vectors("the cat sat on the mat"), vectors("a big cat sat on a mat")
    for word in ("cat", "sat", "on", "mat"):
        np.testing.assert_array_equal(one[word], other[word])
    assert not np.array_equal(one["cat"], vectors("the cat", seed=1)["cat"])
    assert not np.array_equal(one["cat"], one["mat"])
    np.testing.assert_array_equal(vectors("the cat", d_model=16)["cat"][:8], one["cat"])  # wider: the same start


# --- cross-attention ------------------------------------------------------------------------------


def test_cross_attention_gives_n_q_by_n_k_weights_and_shares_one_embedding_table():
    cfg = AttentionConfig(heads=2, d_model=8)
    trace = run(AttentionRequest(config=cfg, sentence="the cat sat on the mat", cross_sentence="the dog"))
    assert trace.query_tokens == ("the", "dog") and len(trace.key_tokens) == 6
    assert trace["weights"].shape == (2, 2, 6)
    assert trace["q"].shape[1] == 2 and trace["k"].shape[1] == 6 and trace["output"].shape == (2, 8)
    assert trace.config["cross"] is True
    # "the" is looked up in the same table for both sentences.
    np.testing.assert_array_equal(trace["query_input"].array[0], trace["embeddings"].array[0])
    np.testing.assert_allclose(trace["weights"].array.sum(-1), 1.0, atol=1e-6)


def test_cross_attention_mixing_a_key_matrix_with_a_query_sentence():
    cfg = AttentionConfig(heads=1, d_model=4)
    trace = run(AttentionRequest(config=cfg, embeddings=_matrix(0, 3, 4), labels=("x", "y", "z"), cross_sentence="hi"))
    assert trace.key_tokens == ("x", "y", "z") and trace.query_tokens == ("hi",)
    assert trace["weights"].shape == (1, 1, 3)


def test_cross_attention_with_positional_encoding_encodes_each_sequence_from_position_zero():
    cfg = AttentionConfig(heads=1, d_model=4, pe="sinusoidal")
    x_k, x_q = _matrix(1, 5, 4), _matrix(2, 3, 4)
    trace = run(AttentionRequest(config=cfg, embeddings=x_k, cross_embeddings=x_q))
    p = trace["positional_encoding"].array
    np.testing.assert_allclose(trace["input"].array, x_k + p, atol=1e-6)
    np.testing.assert_allclose(trace["query_input"].array, x_q + p[:3], atol=1e-6)


def test_blank_cross_sentence_means_self_attention():
    trace = run(AttentionRequest(config=AttentionConfig(), sentence="a b", cross_sentence="   "))
    assert "query_input" not in trace and trace.query_tokens == ("a", "b")


# --- permutation ----------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    data=st.data(),
    n=st.integers(2, 8),
    heads=st.sampled_from([1, 2, 4]),
    score=st.sampled_from(["dot", "scaled", "additive", "general"]),
    seed=st.integers(0, 2**16),
)
def test_without_positional_encoding_permuting_tokens_permutes_outputs_and_weights(data, n, heads, score, seed):
    perm = np.array(data.draw(st.permutations(range(n))))
    x = _matrix(seed, n, 8)
    cfg = AttentionConfig(heads=heads, d_model=8, score=score, seed=seed, bias=True)
    plain = run(AttentionRequest(config=cfg, embeddings=x))
    shuffled = run(AttentionRequest(config=cfg, embeddings=x[perm]))
    np.testing.assert_allclose(shuffled["output"].array, plain["output"].array[perm], atol=1e-5)
    np.testing.assert_allclose(shuffled["weights"].array, plain["weights"].array[:, perm][:, :, perm], atol=1e-6)


def test_with_sinusoidal_encoding_permuting_tokens_does_not_permute_outputs():
    x = _matrix(3, 6, 8)
    perm = np.array([5, 4, 3, 2, 1, 0])
    cfg = AttentionConfig(heads=2, d_model=8, pe="sinusoidal")
    plain = run(AttentionRequest(config=cfg, embeddings=x))
    shuffled = run(AttentionRequest(config=cfg, embeddings=x[perm]))
    assert not np.allclose(shuffled["output"].array, plain["output"].array[perm], atol=1e-3)


# --- device ---------------------------------------------------------------------------------------


@pytest.fixture
def fresh_cuda_probe():
    device_mod.cuda_name.cache_clear()
    yield
    device_mod.cuda_name.cache_clear()


def test_trace_reports_the_cpu_on_this_machine(fresh_cuda_probe):
    assert device_mod.cuda_name() is None
    trace = run(AttentionRequest(config=AttentionConfig(), sentence="a b"))
    assert trace.device == "cpu" and trace.meta["notices"] == []


def test_requesting_cuda_without_it_falls_back_to_the_cpu_with_a_notice(monkeypatch):
    monkeypatch.setattr(device_mod, "cuda_name", lambda: None)
    device, label, notice = device_mod.pick_device("cuda")
    assert device == torch.device("cpu") and label == "cpu" and "CUDA" in notice
    assert device_mod.pick_device("auto")[2] is None
    trace = run(AttentionRequest(config=AttentionConfig(device="cuda"), sentence="a b"))
    assert trace.device == "cpu"
    assert trace.meta["notices"] == [notice]


def test_a_broken_cuda_driver_is_treated_as_no_cuda(monkeypatch, fresh_cuda_probe):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # this CPU build then fails to allocate
    assert device_mod.cuda_name() is None
    assert device_mod.pick_device("cuda")[:2] == (torch.device("cpu"), "cpu")


# --- cancellation and input errors ----------------------------------------------------------------


def test_should_stop_cancels_at_a_stage_boundary():
    calls = []

    def should_stop() -> bool:
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(Cancelled):
        run(AttentionRequest(config=AttentionConfig(), sentence="a b c"), should_stop=should_stop)
    assert len(calls) == 4


@pytest.mark.parametrize(
    "request_kwargs,message",
    [
        (dict(sentence=""), "sentence is empty"),
        (dict(sentence=" \t\n"), "sentence is empty"),
        (dict(sentence="a b c", config=AttentionConfig(max_tokens=2)), "more than the limit of 2"),
        (dict(sentence="a b", config=AttentionConfig(d_model=10, heads=4)), "not divisible"),
        (dict(sentence="a b", config=AttentionConfig(mask="padding", pad_positions=(2,))), "out of range"),
        (dict(sentence="a b", config=AttentionConfig(mask="custom")), "custom"),
        (dict(sentence="a b", config=AttentionConfig(mask="custom"), custom_mask=np.zeros((2, 3), bool)), "shape"),
        (dict(sentence="a b", config=AttentionConfig(temperature=0.0)), "temperature"),
        (dict(sentence="a b", config=AttentionConfig(score="cosine")), "unknown score"),
        (dict(embeddings=np.zeros((2, 3), np.float32)), "d_model is 16"),
        (dict(embeddings=np.zeros((0, 16), np.float32)), "no rows"),
        (dict(embeddings=np.full((2, 16), np.nan)), "NaN"),
        (dict(embeddings=np.zeros((2, 16)), labels=("a",)), "1 labels given for 2 rows"),
        (dict(sentence="a", cross_embeddings=np.zeros((2, 16), np.float32), cross_labels=("x",)), "query"),
    ],
)
def test_bad_requests_raise_one_line_input_errors(request_kwargs, message):
    with pytest.raises(InputError, match=message) as info:
        run(AttentionRequest(**request_kwargs))
    assert "\n" not in str(info.value)


def test_a_trace_too_big_for_memory_is_refused_before_computing(monkeypatch):
    # What is kept whole (Q, K, V, head outputs) of 16,384 tokens × 64 heads of d_k 1024 is ~16 GiB.
    import models.engine.pipeline as pipeline_mod

    cfg = AttentionConfig(heads=64, d_model=128, d_k=1024)
    sentence = " ".join(f"w{i}" for i in range(16384))
    with pytest.raises(InputError, match=r"16384×16384 tokens with 64 heads need \d+\.\d GiB"):
        run(AttentionRequest(config=cfg, sentence=sentence))
    small = AttentionConfig(heads=2, d_model=8)
    exact = pipeline_mod.trace_bytes(small, 3, 3, cross=False)
    trace = run(AttentionRequest(config=small.replace(pe="sinusoidal", mask="causal"), sentence="a b c"))
    assert sum(s.nbytes for s in trace.stages) == exact  # small inputs: the estimate is the real size
    monkeypatch.setattr(pipeline_mod, "MAX_TRACE_BYTES", exact - 1)
    with pytest.raises(InputError, match="limit"):
        run(AttentionRequest(config=small, sentence="a b c"))


def test_4096_tokens_with_64_heads_are_no_longer_refused():
    # The n×n stages are computed per head when looked at: 64 heads of 4096² (4 GiB each stage) fit.
    cfg = AttentionConfig(heads=64, d_model=128, mask="causal")
    trace = run(AttentionRequest(config=cfg, sentence=" ".join(f"w{i}" for i in range(4096))))
    weights = trace["weights"]
    assert weights.shape == (64, 4096, 4096) and weights.lazy
    row = weights.rows(63, 4095, 4096)[0]
    assert row.shape == (4096,) and abs(float(row.sum()) - 1.0) < 1e-5
    assert trace.nbytes < 1 << 30


def test_a_stage_read_whole_is_cancelled_before_each_head():
    """A small stage is read whole per head (no bands to check between): a newer request must still
    stop its conversion at the next head, not after every head (it waited up to ~80 ms at 512 tokens)."""
    from models.engine.reduce import reduce_head

    trace = run(AttentionRequest(config=AttentionConfig(heads=4, d_model=16), sentence="a b c d e f"))
    stage = trace["weighted_norms"] if "weighted_norms" in trace else trace["weights"]
    computed = []
    stage.store.on_compute = lambda name, head, block: computed.append(head)
    with pytest.raises(Cancelled):
        reduce_head(stage, 1, should_stop=lambda: True)
    assert computed == []  # nothing read once a newer request came
    assert reduce_head(stage, 1).step == (1, 1) and computed == [1]
