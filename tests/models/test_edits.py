"""What-if edits: every stage after an edited one equals the maths on the edited value."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from engine_refs import causal_mask

from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine import attention as att
from models.engine.edits import Edit, apply_edits, difference, hide_key, hide_token
from models.engine.pipeline import materialize, run
from models.engine.weights import random_weights

SENTENCE = "the cat sat on the mat"


def _req(**cfg) -> AttentionRequest:
    return AttentionRequest(config=AttentionConfig(heads=2, d_model=8, seed=3, **cfg), sentence=SENTENCE)


def _after_q(q: np.ndarray, k: np.ndarray, v: np.ndarray, cfg: AttentionConfig, hidden=None) -> dict:
    """Scores … output from whole tensors with models.engine.attention, independently of the pipeline."""
    w = random_weights(cfg)
    t = torch.from_numpy
    s = att.dot_scores(t(q), t(k))  # (h, n, n)
    out = {"scores": s, "scaled": att.scale(s, cfg.head_dim_k)}
    x = out["scaled"]
    if hidden is not None:
        x = out["masked"] = att.apply_mask(x, torch.as_tensor(hidden))
    a = out["weights"] = att.softmax(x, cfg.temperature)
    o = out["head_output"] = att.weighted_sum(a, t(v))
    c = out["concat"] = att.concat_heads(o)
    out["output"] = att.output_projection(c, t(w.W_o), None)
    return {k: x.numpy() for k, x in out.items()}


def test_an_edited_q_cell_changes_every_later_stage_as_the_maths_says():
    req = _req()
    original = materialize(run(req))
    edited = materialize(apply_edits(req, [Edit("q", (1, 2, 3), 5.0)]))
    q = original["q"].array.copy()
    q[1, 2, 3] = 5.0
    np.testing.assert_array_equal(edited["q"].array, q)
    for name in ("embeddings", "input", "k", "v"):  # before q: unchanged, bit for bit
        np.testing.assert_array_equal(edited[name].array, original[name].array)
    expected = _after_q(q, original["k"].array, original["v"].array, req.config)
    for name, value in expected.items():
        np.testing.assert_allclose(edited[name].array, value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(edited["weights"].array[1, 2], original["weights"].array[1, 2])
    np.testing.assert_array_equal(edited["weights"].array[0], original["weights"].array[0])  # other head


def test_an_edited_input_recomputes_q_k_v():
    req = _req(pe="sinusoidal")
    original = run(req)
    edited = apply_edits(req, [Edit("input", (0, 1), -2.0)])
    x = original["input"].array.copy()
    x[0, 1] = -2.0
    w = random_weights(req.config)
    np.testing.assert_array_equal(edited["input"].array, x)
    np.testing.assert_array_equal(edited["embeddings"].array, original["embeddings"].array)
    for name, weight in (("q", w.W_q), ("k", w.W_k), ("v", w.W_v)):
        expected = att.project(torch.from_numpy(x), torch.from_numpy(weight), None).numpy()
        np.testing.assert_allclose(edited[name].array, expected, rtol=1e-6, atol=1e-6, err_msg=name)


def test_an_edited_embedding_reaches_the_input_through_the_positional_encoding():
    req = _req(pe="sinusoidal")
    original = run(req)
    edited = apply_edits(req, [Edit("embeddings", (2, 0), 1.5)])
    pe = original["positional_encoding"].array
    np.testing.assert_allclose(edited["input"].array[2, 0], np.float32(1.5) + pe[2, 0], rtol=1e-6)


def test_an_edited_score_sets_the_rest():
    req = _req(mask="causal")
    original = materialize(run(req))
    edited = materialize(apply_edits(req, [Edit("scores", (0, 3, 1), 40.0)]))
    s = original["scores"].array.copy()
    s[0, 3, 1] = 40.0
    np.testing.assert_array_equal(edited["scores"].array, s)
    np.testing.assert_array_equal(edited["q"].array, original["q"].array)
    a = att.softmax(att.apply_mask(att.scale(torch.from_numpy(s), 4), causal_mask(6, 6)))
    np.testing.assert_allclose(edited["weights"].array, a.numpy(), rtol=1e-5, atol=1e-7)
    assert edited["weights"].array[0, 3, 1] > 0.99


def test_no_edits_gives_the_original_trace_exactly_and_edits_are_pure():
    req = _req(mask="padding", pad_positions=(1,))
    original = materialize(run(req))
    before = {s.name: s.array.copy() for s in original.stages}
    same = materialize(apply_edits(req, []))
    assert same.names == original.names
    for name in original.names:
        np.testing.assert_array_equal(same[name].array, before[name], err_msg=name)
    apply_edits(req, [Edit("q", (0, 0, 0), 9.0), Edit("input", (1, 1), 3.0), hide_key(0, 2)], original)
    for name in original.names:  # the original trace is untouched
        np.testing.assert_array_equal(original[name].array, before[name], err_msg=name)
    assert req.config.mask == "padding" and req.custom_mask is None


def test_hiding_a_key_makes_its_weight_exactly_zero_and_showing_undoes_the_mask():
    req = _req(mask="causal")
    edited = apply_edits(req, [hide_key(4, 2), hide_key(1, 3, hidden=False), *hide_token(0, 6)])
    w = edited["weights"].array
    assert (w[:, 4, 2] == 0).all()
    assert (w[:, 1, 3] > 0).all()  # causal hid it; the edit shows it
    assert (w[:, :, 0] == 0).all()
    np.testing.assert_allclose(w[:, 1:].sum(-1), 1.0, rtol=1e-5)
    assert (w[:, 0] == 0).all()  # query 0 saw only key 0: now nothing, zero weights, never NaN
    assert edited.config["mask"] == "custom"


def test_bad_edits_are_refused_with_one_line():
    req = _req()
    for edit, words in [
        (Edit("weights", (0, 0, 0), 1.0), "cannot edit"),
        (Edit("q", (2, 0, 0), 1.0), "outside its shape"),
        (Edit("q", (0, 0), 1.0), "outside its shape"),
        (Edit("k", (0, 0, 0), float("nan")), "finite"),
        (Edit("query_input", (0, 0), 1.0), "no stage"),
    ]:
        with pytest.raises(InputError, match=words):
            apply_edits(req, [edit])


def test_difference_is_edited_minus_original_and_names_the_largest_change():
    req = _req(mask="causal")
    original = run(req)
    edited = apply_edits(req, [Edit("scores", (1, 4, 2), 30.0)])
    d = difference(original, edited, "weights", 1)
    expected = edited["weights"].head(1).astype(np.float64) - original["weights"].head(1)
    np.testing.assert_allclose(d.delta, expected, atol=1e-7)
    assert (d.row, d.col, d.row_label, d.col_label) == (4, 2, "the", "sat")
    assert d.value == pytest.approx(expected[4, 2])
    m = difference(original, edited, "masked", 1)  # −∞ in both runs: no change, never NaN
    assert not np.isnan(m.delta).any() and m.delta[0, 5] == 0
    with pytest.raises(InputError, match="shape"):
        difference(original, run(AttentionRequest(config=req.config, sentence="a b")), "weights", 0)
