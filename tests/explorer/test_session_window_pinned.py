"""Save session… / Open session… with a pinned run: the comparison comes back exactly as it was,
for toy and model runs, with the pinned run's own edits; main.py --session re-pins it too."""

import dataclasses
import json
import zipfile

import numpy as np
import pytest
from trace_arrays import assert_same_arrays, stage_arrays

from explorer.app import run_app
from explorer.state import Inputs
from models.engine.edits import Edit
from models.files.session import load_session
from models.pretrained import list_models
from models.runspec import RunSpec

SMALL = Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8)  # as conftest.SMALL
needs_minilm = pytest.mark.skipif(not any(e.name == "minilm" for e in list_models()), reason="needs minilm")





def shown_comparison(window):
    """The comparison on screen, once the read thread has answered (explorer.jobs)."""
    assert window.jobs.wait_until_idle()
    return window.compare.comparison

def _save(window, path, monkeypatch):
    monkeypatch.setattr(window.sessions, "ask_path", lambda save: str(path))
    assert window.sessions.save_session()
    assert not window.status_line.is_error


def _reopen(make_window, qtbot, settle, path, monkeypatch, inputs=SMALL):
    other = make_window(dataclasses.replace(inputs, sentence="Something else entirely.", seed=9))
    monkeypatch.setattr(other.sessions, "ask_path", lambda save: str(path))
    assert other.sessions.open_session()
    qtbot.waitUntil(lambda: other.compare.pinned is not None and other.is_settled(), timeout=30_000)
    settle(other)
    return other


def _pinned_then(window, settle, **changes):
    assert window.compare.pin()
    window.state.update_inputs(**changes)
    settle(window)


def test_a_pinned_toy_run_comes_back_beside_the_current_one(make_window, qtbot, settle, tmp_path, monkeypatch):
    window = make_window(dataclasses.replace(SMALL, mask="causal"))
    window.state.set_stage("weights")
    window.state.set_head(1)
    _pinned_then(window, settle, temperature=2.0, seed=3)
    pinned, current = stage_arrays(window.compare.pinned.trace), stage_arrays(window.state.display.trace)
    delta, heading = shown_comparison(window).delta.copy(), window.compare.view.heading.text()
    _save(window, tmp_path / "s.zip", monkeypatch)
    assert json.loads(zipfile.ZipFile(tmp_path / "s.zip").read("session.json"))["version"] == 3

    other = _reopen(make_window, qtbot, settle, tmp_path / "s.zip", monkeypatch)
    assert other.state.inputs == window.state.inputs
    assert_same_arrays(other.compare.pinned.trace, pinned)
    assert_same_arrays(other.state.display.trace, current)
    shown = shown_comparison(other)
    assert (shown.stage, shown.head, shown.message) == ("weights", 1, "")
    np.testing.assert_array_equal(shown.delta, delta)
    assert other.compare.view.isVisible() and other.compare.view.heading.text() == heading
    assert other.menus.qaction("stage.unpin").isEnabled()
    assert "does not show" not in other.status_line.text()


def test_a_pinned_run_with_edits_and_the_difference_view(make_window, qtbot, settle, tmp_path, monkeypatch):
    window = make_window()
    window.experiment.add_edit(Edit("q", (0, 1, 2), 4.0))
    window.experiment.difference.setChecked(True)
    settle(window)
    _pinned_then(window, settle, sentence="The dog sat on the rug.")
    window.experiment.difference.setChecked(False)
    window.experiment.add_edit(Edit("v", (1, 0, 0), -2.0))
    settle(window)
    pinned, current = stage_arrays(window.compare.pinned.trace), stage_arrays(window.state.display.trace)
    _save(window, tmp_path / "s.zip", monkeypatch)
    session = load_session(tmp_path / "s.zip")
    assert session.pinned.edits == (Edit("q", (0, 1, 2), 4.0),) and session.pinned.difference
    assert json.loads(zipfile.ZipFile(tmp_path / "s.zip").read("session.json"))["version"] == 3

    other = _reopen(make_window, qtbot, settle, tmp_path / "s.zip", monkeypatch)
    assert other.compare.pinned.trace.meta.get("difference")
    assert_same_arrays(other.compare.pinned.trace, pinned)
    assert_same_arrays(other.state.display.trace, current)
    assert other.experiment.edits == [Edit("v", (1, 0, 0), -2.0)]
    assert not other.experiment.difference.isChecked()


def test_a_shape_mismatch_comparison_comes_back_as_it_was(make_window, qtbot, settle, tmp_path, monkeypatch):
    window = make_window()
    window.state.set_stage("scores")
    _pinned_then(window, settle, sentence="A much longer sentence than the one we had before it.", heads=4)
    message = shown_comparison(window).message
    _save(window, tmp_path / "s.zip", monkeypatch)
    other = _reopen(make_window, qtbot, settle, tmp_path / "s.zip", monkeypatch)
    assert shown_comparison(other).message == message and message.startswith("shapes differ")
    assert other.state.stage_name == "scores"


@needs_minilm
def test_a_pinned_model_layer_comes_back(make_window, qtbot, settle, tmp_path, monkeypatch):
    model = Inputs(sentence="The cat sat on the mat.", model="minilm", layer=0)
    window = make_window(model)
    window.state.set_stage("weights")
    _pinned_then(window, settle, layer=2, model_mask="causal")
    pinned, current = stage_arrays(window.compare.pinned.trace), stage_arrays(window.state.display.trace)
    delta = shown_comparison(window).delta.copy()
    _save(window, tmp_path / "s.zip", monkeypatch)
    assert load_session(tmp_path / "s.zip").pinned == RunSpec(model="minilm", layer=0, sentence=model.sentence)
    other = _reopen(make_window, qtbot, settle, tmp_path / "s.zip", monkeypatch)
    assert (other.state.inputs.model, other.state.inputs.layer, other.state.inputs.model_mask) == \
        ("minilm", 2, "causal")  # fmt: skip
    assert_same_arrays(other.compare.pinned.trace, pinned)
    assert_same_arrays(other.state.display.trace, current)
    np.testing.assert_array_equal(shown_comparison(other).delta, delta)


def test_main_session_re_pins_and_saves_the_same_session(tmp_path, monkeypatch, make_window, settle, capsys):
    window = make_window()
    window.experiment.add_edit(Edit("k", (0, 0, 1), 3.0))
    settle(window)
    _pinned_then(window, settle, score="dot")
    window.state.set_stage("scaled" if "scaled" in window.state.display.trace else "weights")
    window.state.set_query(2)
    _save(window, tmp_path / "s.zip", monkeypatch)
    saved = load_session(tmp_path / "s.zip")

    again = tmp_path / "again.zip"
    argv = ["--session", str(tmp_path / "s.zip"), "--screenshot", str(tmp_path / "a.png"), "--save-session", str(again)]
    assert run_app(argv) == 0
    assert "does not show" not in capsys.readouterr().err
    back = load_session(again)
    assert (back.run, back.stage, back.head, back.query) == (saved.run, saved.stage, saved.head, saved.query)
    assert back.pinned is not None and back.pinned == saved.pinned
    for key, array in saved.run.arrays.items():
        assert np.array_equal(back.run.arrays[key], array), key


@needs_minilm
def test_a_pinned_model_layer_keeps_its_edits(make_window, qtbot, settle, tmp_path, monkeypatch):
    model = Inputs(sentence="The cat sat on the mat.", model="minilm", layer=1)
    window = make_window(model)
    window.state.set_stage("weights")
    window.experiment.add_edit(Edit("q", (0, 2, 3), 5.0))
    settle(window)
    _pinned_then(window, settle, layer=3)
    pinned = stage_arrays(window.compare.pinned.trace)
    _save(window, tmp_path / "s.zip", monkeypatch)
    assert load_session(tmp_path / "s.zip").pinned.edits == (Edit("q", (0, 2, 3), 5.0),)
    other = _reopen(make_window, qtbot, settle, tmp_path / "s.zip", monkeypatch, inputs=model)
    assert_same_arrays(other.compare.pinned.trace, pinned)
