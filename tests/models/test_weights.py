"""Weights files: the .npz round trip (checked against nn.MultiheadAttention) and every refusal."""

from __future__ import annotations

import numpy as np
import pytest
from engine_refs import make_mha, mha_to_weights, run_mha

from models.config import AttentionConfig, AttentionRequest, AttentionWeights, InputError
from models.engine.pipeline import run
from models.engine.weights import expected_shapes, load_weights, random_weights, save_weights

FIELDS = ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")


@pytest.mark.parametrize("heads", [1, 4])
@pytest.mark.parametrize("causal", [False, True], ids=["no-mask", "causal"])
def test_weights_file_round_trip_reproduces_nn_multihead_attention(tmp_path, heads, causal):
    d_model = 16
    mha = make_mha(d_model, heads, seed=21)
    path = tmp_path / "mha.npz"
    save_weights(path, mha_to_weights(mha))
    cfg = AttentionConfig(heads=heads, d_model=d_model, mask="causal" if causal else "none")
    loaded = load_weights(path, cfg)
    original = mha_to_weights(mha)
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(loaded, name), getattr(original, name), err_msg=name)
    x = np.random.default_rng(1).standard_normal((6, d_model)).astype(np.float32)
    trace = run(AttentionRequest(config=cfg, embeddings=x, weights=loaded))
    out, weights = run_mha(mha, x, x, causal, average=False)
    np.testing.assert_allclose(trace["output"].array, out, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(trace["weights"].array, weights, atol=1e-5, rtol=1e-5)
    assert trace.config["weights"] == "file"


def test_save_then_load_keeps_score_parameters_and_missing_parts_come_from_the_seed(tmp_path):
    cfg = AttentionConfig(heads=2, d_model=8, seed=9)
    full = random_weights(cfg)
    for score, names in (("additive", ("W_1", "W_2", "w")), ("general", ("W_g",))):
        scored = random_weights(cfg.replace(score=score))
        save_weights(tmp_path / "full.npz", scored)
        back = load_weights(tmp_path / "full.npz", cfg.replace(score=score))
        assert sorted(scored.extra) == sorted(names)
        for name in names:
            np.testing.assert_array_equal(back.extra[name], scored.extra[name])
    np.savez(tmp_path / "qkv.npz", W_q=full.W_q, W_k=full.W_k, W_v=full.W_v)
    partial = load_weights(tmp_path / "qkv.npz", cfg)
    np.testing.assert_array_equal(partial.W_o, full.W_o)
    assert partial.b_q is None and partial.b_o is None


def test_single_head_files_may_hold_two_dimensional_matrices(tmp_path):
    cfg = AttentionConfig(heads=1, d_model=6, d_k=4)
    rng = np.random.default_rng(0)
    arrays = {"W_q": rng.random((6, 4)), "W_k": rng.random((6, 4)), "W_v": rng.random((6, 4)), "b_q": rng.random(4)}
    np.savez(tmp_path / "one.npz", **arrays)
    w = load_weights(tmp_path / "one.npz", cfg)
    assert w.W_q.shape == (1, 6, 4) and w.b_q.shape == (1, 4) and w.W_q.dtype == np.float32
    np.testing.assert_allclose(w.W_q[0], arrays["W_q"], rtol=1e-6)


def _good(cfg: AttentionConfig) -> dict[str, np.ndarray]:
    return {k: np.zeros(v, np.float32) for k, v in expected_shapes(cfg).items() if k in ("W_q", "W_k", "W_v")}


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(W_k=np.zeros((2, 8, 3))), r"W_k has shape \(2, 8, 3\), expected \(2, 8, 4\)"),
        (dict(W_o=np.zeros((8, 9))), r"W_o has shape \(8, 9\), expected \(8, 8\)"),
        (dict(b_v=np.zeros(4)), r"b_v has shape \(4,\), expected \(2, 4\)"),
        (dict(W_v=None), "lacks W_v"),
        (dict(W_x=np.zeros(1)), "unknown arrays: W_x"),
        (dict(W_q=np.full((2, 8, 4), np.inf)), "W_q contains NaN or infinite values"),
        (dict(W_q=np.zeros((2, 8, 4), bool)), "W_q must hold real numbers"),
        (dict(W_q=np.zeros((2, 8, 4), complex)), "W_q must hold real numbers"),
    ],
    ids=["wrong-shape", "wrong-W_o", "wrong-bias", "missing", "unknown", "infinite", "bool", "complex"],
)
def test_weights_file_problems_are_input_errors_naming_the_array(tmp_path, change, message):
    cfg = AttentionConfig(heads=2, d_model=8)
    arrays = _good(cfg) | change
    np.savez(tmp_path / "w.npz", **{k: v for k, v in arrays.items() if v is not None})
    with pytest.raises(InputError, match=message):
        load_weights(tmp_path / "w.npz", cfg)


def test_weights_file_with_a_pickled_object_array_is_refused_without_unpickling(tmp_path):
    np.savez(tmp_path / "w.npz", W_q=np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="cannot read weights file"):
        load_weights(tmp_path / "w.npz", AttentionConfig())


def test_missing_or_unreadable_weights_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_weights(tmp_path / "nope.npz", AttentionConfig())
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(InputError, match="cannot read weights file"):
        load_weights(tmp_path / "junk.npz", AttentionConfig())


def test_a_single_array_npy_given_as_weights_is_an_input_error(tmp_path):
    # Regression: np.load returns an ndarray for .npy, which crashed with a TypeError.
    np.save(tmp_path / "w.npy", np.zeros((2, 16, 8), np.float32))
    with pytest.raises(InputError, match="not a .npz archive"):
        load_weights(tmp_path / "w.npy", AttentionConfig())


def test_request_weights_with_another_d_model_are_refused():
    w = random_weights(AttentionConfig(d_model=8))
    given = AttentionWeights(W_q=w.W_q, W_k=w.W_k, W_v=w.W_v, W_o=None)
    with pytest.raises(InputError, match="d_model=8"):
        run(AttentionRequest(config=AttentionConfig(d_model=16), sentence="a b", weights=given))
