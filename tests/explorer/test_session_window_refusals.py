"""A bad session file is refused with one line and leaves the window exactly as it was: its
inputs, held arrays, edits, pinned run and view. A failed save keeps the old file whole."""

import json
import os
import zipfile

import numpy as np
import pytest

from explorer.state import Inputs
from models.engine.edits import Edit
from models.engine.held_arrays import HeldArrays
from models.files.session import Session, load_session, save_session
from models.runspec import RunSpec

SMALL = Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8)  # as conftest.SMALL


def _rewrite_json(path, change):
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    doc = json.loads(members["session.json"])
    change(doc)
    members["session.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


@pytest.fixture
def busy_window(make_window, settle, tmp_path):
    """A window with a session's arrays in memory, an edit, a pinned run and a chosen view."""
    rng = np.random.default_rng(3)
    save_session(tmp_path / "start.zip", Session(RunSpec(
        heads=2, d_model=6, arrays=HeldArrays({"embeddings": rng.standard_normal((4, 6))}))))  # fmt: skip
    window = make_window()
    assert window.sessions.open_session(str(tmp_path / "start.zip"))
    settle(window)
    assert window.compare.pin()
    window.experiment.add_edit(Edit("q", (1, 0, 0), 2.0))
    settle(window)
    window.state.set_stage("scores")
    window.state.set_head(1)
    settle(window)  # the new grid built: what follows starts from a settled window
    return window


def _snapshot(window):
    return (window.state.inputs, list(window.experiment.edits), window.compare.pinned, window.state.stage_name,
            window.state.head, window.state.query, window.state.display)  # fmt: skip


@pytest.mark.parametrize("damage, words", [
    ("newer", "written by a newer version (format 4); this one reads format 3"),
    ("corrupt", "corrupt or truncated"),
    ("truncated", "corrupt or truncated"),
    ("missing-model", "no model 'surely-not-a-model'"),
    ("missing-pinned-model", "no model 'surely-not-a-model'"),
    ("bad-pinned-edit", "outside its shape"),
    ("bad-difference", "run difference must be true or false"),
    ("missing", "file not found"),
])  # fmt: skip
def test_a_bad_session_changes_nothing(busy_window, settle, qtbot, tmp_path, damage, words):
    window = busy_window
    before = _snapshot(window)
    path = tmp_path / "bad.zip"
    good = Session(RunSpec(sentence="a b c"), pinned=RunSpec(sentence="a b"))
    save_session(path, good)
    if damage == "newer":
        _rewrite_json(path, lambda d: d.update(version=4))
    elif damage == "corrupt":
        path.write_bytes(b"PK\x03\x04" + os.urandom(200))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-40])
    elif damage == "missing-model":
        save_session(path, Session(RunSpec(model="surely-not-a-model", sentence="a")))
    elif damage == "missing-pinned-model":
        save_session(path, Session(RunSpec(sentence="a"), pinned=RunSpec(model="surely-not-a-model",
                                                                          sentence="a")))  # fmt: skip
    elif damage == "bad-pinned-edit":
        pinned = RunSpec(sentence="a b", edits=(Edit("q", (0, 9, 0), 1.0),))
        save_session(path, Session(RunSpec(sentence="a"), pinned=pinned))
    elif damage == "bad-difference":
        _rewrite_json(path, lambda d: d["run"].update(difference="yes"))
    elif damage == "missing":
        path.unlink()
    assert not window.sessions.open_session(str(path))
    text = window.status_line.plain_text()
    assert window.status_line.is_error and words in text and "\n" not in text
    qtbot.wait(50)  # nothing queued behind the refusal either
    assert window.is_settled() and _snapshot(window) == before


def test_a_failed_save_keeps_the_old_file_whole(busy_window, tmp_path, monkeypatch):
    window = busy_window
    old = tmp_path / "s.zip"
    assert window.sessions.save_session(str(old))
    data = old.read_bytes()
    window.state.update_inputs(seed=11)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    assert not window.sessions.save_session(str(old))
    assert "No space left" in window.status_line.text() and "\n" not in window.status_line.text()
    assert old.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "settings.ini") == ["s.zip", "start.zip"]


def test_a_file_gone_since_it_was_shown_is_saved_from_the_shown_run(make_window, settle, tmp_path):
    """Saving reads the RunSpec of the run on screen (its arrays read when it was computed), not the
    files again: a file deleted since still saves what is shown. Before a first result the inputs'
    own RunSpec is saved, and a file gone then gives one line."""
    np.save(tmp_path / "x.npy", np.ones((3, 8), np.float32))
    window = make_window()
    window.state.update_inputs(embeddings_file=str(tmp_path / "x.npy"))
    settle(window)
    (tmp_path / "x.npy").unlink()  # gone since it was opened
    assert window.sessions.save_session(str(tmp_path / "s.zip"))
    assert load_session(tmp_path / "s.zip").run == window.state.display.request
    window.state.display = None  # as before the first result
    assert not window.sessions.save_session(str(tmp_path / "t.zip"))
    assert "embeddings file not found" in window.status_line.text()
    assert not (tmp_path / "t.zip").exists()


def test_a_session_whose_model_edit_falls_outside_the_layer_leaves_the_window_as_it_was(busy_window, settle,
                                                                                          tmp_path):  # fmt: skip
    """A model layer's shapes are known once it is traced: such a session opens, its run fails,
    and the window goes back to what it showed, pinned run and edits included."""
    window = busy_window
    settle(window)
    before = _snapshot(window)
    arrays = {s.name: s.array.copy() for s in window.state.display.trace.stages}
    path = tmp_path / "edit.zip"
    save_session(path, Session(RunSpec(model="minilm", layer=1, sentence="The cat sat.",
                                       edits=(Edit("q", (0, 99, 0), 1.0),))))  # fmt: skip
    assert window.sessions.open_session(str(path))  # read well: the edit's bounds are not known yet
    settle(window, timeout=30_000)
    text = window.status_line.plain_text()
    assert "the session was not opened" in text and "outside" in text and "the window is as it was" in text
    *kept, display = _snapshot(window)
    assert kept == list(before[:-1])
    for name, array in arrays.items():
        assert np.array_equal(display.trace[name].array, array), name
