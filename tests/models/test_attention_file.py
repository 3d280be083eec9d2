"""Bring your own attention: files reopen with the model's own metrics; bad files are refused
(one line) or open with warnings."""

from __future__ import annotations

import numpy as np
import pytest

from main import main
from models.config import InputError
from models.files.attention_file import open_attention
from models.files.survey_export import read_heads_csv
from models.pretrained import load_model
from models.reads.survey import METRIC_NAMES, Survey, all_layer_weights, complete, head_metrics, rollout

SENTENCE = "The cat sat on the mat."


@pytest.fixture(scope="module")
def minilm_weights():
    return all_layer_weights(load_model("minilm", device="cpu"), SENTENCE)


def test_npz_reopens_with_the_models_metrics(tmp_path, minilm_weights):
    tokens, weights = minilm_weights
    np.savez(tmp_path / "mine.npz", attention=weights, tokens=np.array(tokens))
    opened = open_attention(tmp_path / "mine.npz")
    assert opened.warnings == [] and opened.query_tokens == tuple(tokens) == opened.key_tokens
    assert not opened.decoder
    mine, theirs = head_metrics(opened.weights), head_metrics(weights)
    for name in METRIC_NAMES:
        np.testing.assert_array_equal(mine[name], theirs[name])
    np.testing.assert_array_equal(rollout(opened.weights), rollout(weights))


def test_export_folder_reopens(tmp_path):
    out = tmp_path / "survey"
    assert main(["export", "--model", "minilm", "--all-layers", "--sentence", SENTENCE, "--out", str(out)]) == 0
    opened = open_attention(out)
    assert opened.warnings == [] and opened.query_tokens[0] == "[CLS]" and opened.weights.shape[:2] == (6, 12)
    survey = complete(Survey(opened.weights, opened.query_tokens, opened.key_tokens, opened.source))
    saved = read_heads_csv(out / "heads.csv")
    for name in METRIC_NAMES:
        np.testing.assert_allclose(survey.metrics[name], saved[name], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(survey.rollout, np.load(out / "rollout.npy"))


def test_lower_ranks_and_separate_token_lists(tmp_path):
    a = np.full((3, 4), 0.25, dtype=np.float64)
    np.save(tmp_path / "one.npy", a)
    one = open_attention(tmp_path / "one.npy")
    assert one.weights.shape == (1, 1, 3, 4) and one.weights.dtype == np.float32
    assert one.query_tokens == ("0", "1", "2") and one.key_tokens == ("0", "1", "2", "3")
    np.savez(tmp_path / "cross.npz", weights=np.stack([a, a]), query_tokens=np.array(["a", "b", "c"]),
             key_tokens=np.array(["w", "x", "y", "z"]))  # fmt: skip
    cross = open_attention(tmp_path / "cross.npz")
    assert cross.weights.shape == (1, 2, 3, 4) and cross.key_tokens == ("w", "x", "y", "z")
    assert cross.query_tokens == ("a", "b", "c") and cross.warnings == []


def test_causal_weights_count_as_a_decoder(tmp_path):
    a = np.tril(np.ones((4, 4)))
    np.save(tmp_path / "causal.npy", a / a.sum(-1, keepdims=True))
    assert open_attention(tmp_path / "causal.npy").decoder


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: np.save(p / "a.npy", np.ones(5)), "1 axes"),
        (lambda p: np.save(p / "a.npy", np.ones((1, 1, 1, 2, 2))), "5 axes"),
        (lambda p: np.save(p / "a.npy", np.array(["x", "y"])), "must hold numbers"),
        (lambda p: np.save(p / "a.npy", np.zeros((0, 3))), "empty"),
        (lambda p: np.save(p / "a.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True), "cannot read"),
        (lambda p: (p / "a.npy").write_bytes(b"not numpy at all"), "cannot read"),
        (lambda p: np.savez(p / "a.npy", x=np.ones((2, 2)), y=np.ones((2, 2))), "name the attention array"),
    ],
)
def test_unusable_files_are_refused_in_one_line(tmp_path, make, message):
    make(tmp_path)
    path = tmp_path / "a.npy"
    if not path.exists():
        path = tmp_path / "a.npy.npz"
    with pytest.raises(InputError, match=message) as info:
        open_attention(path)
    assert "\n" not in str(info.value)


def test_missing_file_and_folder_without_attention(tmp_path):
    with pytest.raises(InputError, match="not found"):
        open_attention(tmp_path / "nope.npz")
    with pytest.raises(InputError, match="neither attention.npy"):
        open_attention(tmp_path)


@pytest.mark.parametrize(
    "change, warning",
    [
        (lambda a: a.__setitem__((1, 0, 0), -0.5), "negative"),
        (lambda a: a.__setitem__((1, 2, 0), 0.9), "do not sum to 1"),
    ],
)
def test_improper_weights_open_with_a_warning(tmp_path, change, warning):
    a = np.full((2, 3, 3), 1 / 3)
    change(a)
    np.savez(tmp_path / "w.npz", attention=a, tokens=np.array(["x", "y", "z"]))
    opened = open_attention(tmp_path / "w.npz")
    assert any(warning in w for w in opened.warnings), opened.warnings
    assert all("\n" not in w for w in opened.warnings)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_infinite_weights_are_refused_by_name(tmp_path, bad):
    """Issue 36: they opened with a warning, and the window's rollout failed on them with a traceback."""
    a = np.full((2, 3, 3), 1 / 3)
    a[0, 1, 1] = bad
    np.save(tmp_path / "w.npy", a)
    with pytest.raises(InputError, match=r"attention file w.npy contains NaN or infinite values \((nan|-?inf) at "
                                         r"\[0, 1, 1\]\)"):  # fmt: skip
        open_attention(tmp_path / "w.npy")


def test_rows_within_tolerance_and_wrong_token_count(tmp_path):
    a = np.full((3, 3), 1 / 3) + 3e-4  # rows sum to 1.0009: within 1e-3
    np.savez(tmp_path / "w.npz", attention=a, tokens=np.array(["x", "y"]))
    opened = open_attention(tmp_path / "w.npz")
    assert opened.warnings == ["2 tokens for 3 positions: positions shown as numbers"]
    assert opened.query_tokens == ("0", "1", "2")
