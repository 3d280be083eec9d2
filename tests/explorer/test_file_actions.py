"""File → Open embeddings… / Open weights… / Open mask…: export's files, export's messages; a bad
file leaves the view as it was."""

import numpy as np
import pytest

from models.cli.export import build_parser
from models.engine import pipeline
from models.files.run_files import spec_from_args
from models.run_engine import toy_request


@pytest.fixture
def window(make_window):
    return make_window()  # conftest.SMALL: "The cat sat on the mat.", 2 heads, d_model 8


def _export_weights(argv):
    spec = spec_from_args(build_parser().parse_args([*argv, "--out", "x"]))
    return pipeline.run(toy_request(spec))["weights"].array


def _unchanged(window, settle, before, inputs):
    settle(window)
    assert window.state.inputs == inputs
    np.testing.assert_array_equal(window.state.display.trace["weights"].array, before)
    assert window.status_line.is_error


def test_open_embeddings_with_labels(window, settle, tmp_path, monkeypatch):
    x = np.random.default_rng(1).standard_normal((5, 12)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    monkeypatch.setattr(window.files, "ask_labels", lambda rows: "a, b, c, d, e")
    assert window.files.open_embeddings(str(tmp_path / "x.npy"))
    settle(window)
    trace = window.state.display.trace
    assert trace.key_tokens == ("a", "b", "c", "d", "e") and window.state.inputs.d_model == 12
    expected = _export_weights(["--embeddings", str(tmp_path / "x.npy"), "--labels", "a,b,c,d,e",
                                "--heads", "2", "--d-model", "12"])  # fmt: skip
    np.testing.assert_array_equal(trace["weights"].array, expected)
    window.files.close_files()
    settle(window)
    assert window.state.display.trace.key_tokens[:2] == ("The", "cat")


def test_bad_embeddings_and_wrong_label_count_change_nothing(window, settle, tmp_path, monkeypatch):
    before, inputs = window.state.display.trace["weights"].array.copy(), window.state.inputs
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    assert not window.files.open_embeddings(str(tmp_path / "bad.npy"))
    assert "cannot read embeddings file" in window.status_line.text()
    _unchanged(window, settle, before, inputs)
    np.save(tmp_path / "x.npy", np.ones((3, 8), np.float32))
    monkeypatch.setattr(window.files, "ask_labels", lambda rows: "only, two")
    assert not window.files.open_embeddings(str(tmp_path / "x.npy"))
    assert window.status_line.plain_text() == "⚠ " + "2 labels given for 3 rows of embeddings"
    _unchanged(window, settle, before, inputs)


def test_open_weights_and_a_bad_one(window, settle, tmp_path):
    rng = np.random.default_rng(2)
    w = {k: rng.standard_normal((2, 8, 4)).astype(np.float32) for k in ("W_q", "W_k", "W_v")}
    np.savez(tmp_path / "w.npz", **w)
    assert window.files.open_weights(str(tmp_path / "w.npz"))
    settle(window)
    expected = _export_weights(["--sentence", "The cat sat on the mat.", "--heads", "2", "--d-model", "8",
                                "--weights", str(tmp_path / "w.npz")])  # fmt: skip
    np.testing.assert_array_equal(window.state.display.trace["weights"].array, expected)
    before, inputs = expected.copy(), window.state.inputs
    np.savez(tmp_path / "bad.npz", W_q=w["W_q"])
    assert not window.files.open_weights(str(tmp_path / "bad.npz"))
    assert "lacks W_k, W_v" in window.status_line.text()
    _unchanged(window, settle, before, inputs)


def test_open_mask_sets_custom_and_a_bad_one(window, settle, tmp_path):
    n = len(window.state.display.trace.key_tokens)
    mask = np.triu(np.ones((n, n), bool), 1)
    np.save(tmp_path / "m.npy", mask)
    assert window.files.open_mask(str(tmp_path / "m.npy"))
    settle(window)
    assert window.state.inputs.mask == "custom" and window.state.inputs.mask_file == str(tmp_path / "m.npy")
    weights = window.state.display.trace["weights"].array
    assert np.all(weights[:, mask] == 0.0)
    before, inputs = weights.copy(), window.state.inputs
    np.save(tmp_path / "small.npy", np.zeros((2, 2), bool))
    assert not window.files.open_mask(str(tmp_path / "small.npy"))
    assert window.status_line.plain_text() == "⚠ " + f"custom mask has shape (2, 2), expected ({n}, {n})"
    _unchanged(window, settle, before, inputs)
    np.save(tmp_path / "floats.npy", np.zeros((n, n), np.float32))
    assert not window.files.open_mask(str(tmp_path / "floats.npy"))
    assert "must hold booleans" in window.status_line.text()
    _unchanged(window, settle, before, inputs)


def test_the_menu_holds_the_actions(window):
    texts = [a.text() for a in window.menus.menus["file"].actions()]
    for text in ("Open embeddings…", "Open weights…", "Open mask…", "Close opened files"):
        assert text in texts
