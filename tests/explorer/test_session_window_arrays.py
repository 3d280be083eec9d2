"""Sessions of a window showing files: the embeddings (+ labels), weights and mask are stored as
arrays, restored in memory (nothing written to disk, the original files not needed), with --d-out
and --bias; save → open gives the same inputs and bit-identical stage arrays, from the File menu
and from main.py --session."""

import dataclasses

import numpy as np
from trace_arrays import assert_same_arrays, stage_arrays

from explorer.app import run_app
from explorer.state import Inputs
from models.cli.export import build_parser
from models.engine import pipeline
from models.engine.held_arrays import HeldArrays
from models.files.run_files import spec_from_args
from models.files.session import load_session
from models.run_engine import toy_request

SMALL = Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8)  # as conftest.SMALL
LABELS = ("a", "b", "c", "d", "e")


def _files(folder):
    rng = np.random.default_rng(5)
    folder.mkdir()
    np.save(folder / "x.npy", rng.standard_normal((5, 12)).astype(np.float32))
    np.savez(folder / "w.npz", W_q=rng.standard_normal((2, 12, 6)), W_k=rng.standard_normal((2, 12, 6)),
             W_v=rng.standard_normal((2, 12, 6)), b_q=rng.standard_normal((2, 6)))  # fmt: skip
    np.save(folder / "m.npy", np.triu(np.ones((5, 5), bool), 1) | (np.arange(5) == 3))
    return folder / "x.npy", folder / "w.npz", folder / "m.npy"




def _delete(*paths):
    for path in paths:
        path.unlink()


def test_files_opened_from_the_menu_come_back_from_memory(make_window, settle, tmp_path, monkeypatch):
    x, w, m = _files(tmp_path / "in")
    window = make_window()
    monkeypatch.setattr(window.files, "ask_labels", lambda rows: ", ".join(LABELS))
    assert window.files.open_embeddings(str(x)) and window.files.open_weights(str(w))
    assert window.files.open_mask(str(m))
    window.state.update_inputs(d_out=5, bias=True)
    settle(window)
    window.state.set_stage("weights")
    window.state.set_query(1)
    expected = stage_arrays(window.state.display.trace)
    assert_same_arrays(pipeline.run(toy_request(spec_from_args(build_parser().parse_args(
        ["--embeddings", str(x), "--labels", ",".join(LABELS), "--weights", str(w), "--mask", "custom",
         "--mask-file", str(m), "--heads", "2", "--d-model", "12", "--d-out", "5", "--bias", "--out", "o"])))),
        expected)  # fmt: skip
    path = tmp_path / "s.zip"
    assert window.sessions.save_session(str(path))
    saved = load_session(path)
    assert sorted(saved.run.arrays) == ["embeddings", "mask", "weights/W_k", "weights/W_q", "weights/W_v",
                                        "weights/b_q"]  # fmt: skip
    assert saved.run.labels == LABELS and saved.run.sentence is None
    _delete(x, w, m)

    other = make_window(dataclasses.replace(SMALL, cross_enabled=True, d_k=2))
    assert other.sessions.open_session(str(path))
    settle(other)
    inputs = other.state.inputs
    assert (inputs.embeddings_file, inputs.weights_file, inputs.mask_file) == ("", "", "")
    assert set(inputs.held) == {"embeddings", "weights/W_q", "weights/W_k", "weights/W_v", "weights/b_q"}
    assert (inputs.labels, inputs.d_out, inputs.bias, inputs.d_model, inputs.mask) == (LABELS, 5, True, 12, "custom")
    assert not inputs.cross_enabled and inputs.d_k is None
    assert "does not show" not in other.status_line.text() and not other.status_line.is_error
    assert_same_arrays(other.state.display.trace, expected)
    assert (other.state.stage_name, other.state.query) == ("weights", 1)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "settings.ini") == ["in", "s.zip"]
    assert list((tmp_path / "in").iterdir()) == []  # nothing was written back to disk

    assert other.sessions.save_session(str(tmp_path / "again.zip"))  # from memory: the same session
    again = load_session(tmp_path / "again.zip")
    assert again.run == saved.run and sorted(again.run.arrays) == sorted(saved.run.arrays)
    for key, array in saved.run.arrays.items():
        assert again.run.arrays[key].dtype == array.dtype and np.array_equal(again.run.arrays[key], array), key

    other.files.close_files()  # back to the sentence: what the session held goes too
    settle(other)
    assert other.state.inputs.held == HeldArrays() and other.state.display.trace.key_tokens[:2] == ("The", "cat")


def test_a_file_opened_after_a_session_replaces_its_array(make_window, settle, tmp_path, monkeypatch):
    x, w, _m = _files(tmp_path / "in")
    window = make_window()
    monkeypatch.setattr(window.files, "ask_labels", lambda rows: "")
    assert window.files.open_embeddings(str(x)) and window.files.open_weights(str(w))
    settle(window)
    assert window.sessions.save_session(str(tmp_path / "s.zip"))
    assert window.sessions.open_session(str(tmp_path / "s.zip"))
    settle(window)
    np.savez(tmp_path / "w2.npz", **{k: v * 2 for k, v in np.load(w).items()})
    assert window.files.open_weights(str(tmp_path / "w2.npz"))
    settle(window)
    assert window.state.inputs.weights_file == str(tmp_path / "w2.npz")
    # The file's weights replace the session's (read once, when opened: held as the session's are).
    held = window.state.inputs.held
    assert {n.split("/")[0] for n in held} == {"embeddings", "weights"}
    for name, array in np.load(w).items():
        np.testing.assert_array_equal(held[f"weights/{name}"], 2 * array)


def test_command_line_files_round_trip_through_save_session_and_session(tmp_path, capsys):
    x, w, m = _files(tmp_path / "in")
    first, second = tmp_path / "s.zip", tmp_path / "t.zip"
    argv = ["--embeddings", str(x), "--labels", ",".join(LABELS), "--weights", str(w), "--mask", "custom",
            "--mask-file", str(m), "--heads", "2", "--d-model", "12", "--d-out", "5", "--bias", "--stage", "output"]
    assert run_app([*argv, "--screenshot", str(tmp_path / "a.png"), "--save-session", str(first)]) == 0
    spec = spec_from_args(build_parser().parse_args([*argv[:-2], "--out", "o"]))
    expected = stage_arrays(pipeline.run(toy_request(spec)))
    _delete(x, w, m)
    capsys.readouterr()
    argv = ["--session", str(first), "--screenshot", str(tmp_path / "b.png"), "--save-session", str(second)]
    assert run_app(argv) == 0
    assert "note:" not in capsys.readouterr().err
    a, b = load_session(first), load_session(second)
    assert (a.run, a.stage) == (b.run, b.stage) and a.run.d_out == 5
    assert sorted(a.run.arrays) == sorted(b.run.arrays) and "weights/b_q" in a.run.arrays
    for key, array in a.run.arrays.items():
        assert np.array_equal(b.run.arrays[key], array), key
    assert_same_arrays(b.trace(), expected)  # what export --session computes
