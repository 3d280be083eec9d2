"""Issue 9 in the window: the painted custom mask, what-if edits, the difference view."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np

from explorer.state import Inputs
from models.engine import pipeline
from models.engine.edits import Edit, apply_edits
from models.run_engine import toy_request

ROOT = Path(__file__).resolve().parents[2]
SMALL = Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8)  # as conftest.SMALL


def _arrays(trace):
    return {s.name: s.array.copy() for s in trace.stages}


def test_painting_a_cell_hides_it_and_the_saved_mask_exports_the_same_weights(make_window, settle, tmp_path):
    window = make_window(dataclasses.replace(SMALL, mask="none"))
    assert not window.mask_dock.isVisible()
    index = window.settings_panel.mask.findData("custom")
    assert index >= 0
    window.settings_panel.mask.setCurrentIndex(index)
    settle(window)
    assert window.mask_dock.isVisible()
    painter = window.mask_dock.painter
    n = len(window.state.display.trace.key_tokens)
    assert painter.shape == (n, n)
    painter.toggle(3, 1)  # query 3 may no longer see key 1
    settle(window)
    weights = window.state.display.trace["weights"].array  # (h, n, n)
    assert np.all(weights[:, 3, 1] == 0.0)
    assert np.all(weights[:, 2, 1] > 0.0)
    path = tmp_path / "mask.npy"
    assert painter.save_file(str(path))
    assert np.array_equal(np.load(path), painter.mask())
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(ROOT / "main.py"), "export", "--sentence", SMALL.sentence, "--heads", "2",
                    "--d-model", "8", "--mask", "custom", "--mask-file", str(path), "--out", str(out)],
                   check=True, cwd=ROOT, capture_output=True)  # fmt: skip
    assert np.array_equal(np.load(out / "weights.npy"), weights)


def test_painter_starts_from_the_previous_mask_and_a_bad_file_changes_nothing(make_window, settle, tmp_path):
    window = make_window(dataclasses.replace(SMALL, mask="causal"))
    window.settings_panel.mask.setCurrentIndex(window.settings_panel.mask.findData("custom"))
    settle(window)
    painter = window.mask_dock.painter
    n = painter.shape[0]
    assert np.array_equal(painter.mask(), np.triu(np.ones((n, n), bool), 1))
    before = window.state.display.trace["weights"].array.copy()
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((2, 2), bool))
    assert not painter.open_file(str(bad))
    assert "shape" in window.status_line.plain_text() and window.status_line.is_error
    assert np.array_equal(window.state.display.trace["weights"].array, before)


def _edit_q(window, monkeypatch, value=5.0, cell=(1, 2, 3)):
    window.state.set_stage("q")
    window.matrix_view.refresh()
    monkeypatch.setattr(window.experiment, "ask_value", lambda *_a: value)
    assert window.experiment.edit_cell(*cell)


def test_an_edit_of_q_recomputes_every_later_stage(make_window, settle, monkeypatch):
    window = make_window()
    original = _arrays(window.state.display.trace)
    _edit_q(window, monkeypatch)
    settle(window)
    request = toy_request(SMALL.to_runspec())
    expected = apply_edits(request, [Edit("q", (1, 2, 3), 5.0)])
    shown = window.state.display.trace
    assert shown["q"].array[1, 2, 3] == 5.0
    for stage in expected.stages:
        assert np.array_equal(shown[stage.name].array, stage.array), stage.name
    assert not np.array_equal(shown["weights"].array, original["weights"])
    assert "1 edit applied" in window.status_line.plain_text()
    # the edited cell is outlined on the q stage
    assert len(window.experiment.marks) == 1

    # undo gives back the original exactly, redo the edit, reset the original
    window.experiment.undo()
    settle(window)
    assert all(np.array_equal(window.state.display.trace[k].array, v) for k, v in original.items())
    window.experiment.redo()
    settle(window)
    assert window.state.display.trace["q"].array[1, 2, 3] == 5.0
    window.experiment.reset()
    settle(window)
    again = pipeline.run(request)
    for stage in again.stages:
        assert np.array_equal(window.state.display.trace[stage.name].array, stage.array)
        assert np.array_equal(original[stage.name], stage.array)


def _difference_of_weights(window, settle, monkeypatch) -> None:
    """Edit one cell of Q (_edit_q), tick Difference and show the weights: edited − original."""
    _edit_q(window, monkeypatch)
    settle(window)
    window.experiment.difference.setChecked(True)
    settle(window)
    window.state.set_stage("weights")


def test_difference_view_shows_edited_minus_original_and_names_the_largest_change(make_window, settle, monkeypatch):
    window = make_window()
    _difference_of_weights(window, settle, monkeypatch)
    settle(window)
    request = toy_request(SMALL.to_runspec())
    a = pipeline.run(request)["weights"].array
    b = apply_edits(request, [Edit("q", (1, 2, 3), 5.0)])["weights"].array
    shown = window.state.display.trace["weights"]
    assert np.allclose(shown.array, (b.astype(np.float64) - a).astype(np.float32))
    image = window.state.display.images["weights"]
    assert not image.sequential and image.levels[0] == -image.levels[1]  # diverging, centred on 0
    text = window.experiment.largest.text()
    assert "largest" in text and window.state.display.trace.query_tokens[2] in text


def test_painted_mask_is_not_remembered_between_launches(settings):
    from explorer.files.persistence import load_inputs, save_inputs

    save_inputs(settings, Inputs(mask="custom", painted_mask=((False, True), (False, False))))
    loaded = load_inputs(settings)
    assert loaded.mask == "none" and loaded.painted_mask == ()


def test_f2_edits_the_selected_cell_as_a_double_click_does(qtbot, make_window, settle, monkeypatch):
    from PySide6.QtCore import Qt

    window = make_window()
    window.state.set_stage("q")
    window.state.set_head(1)  # one plot: head 2
    settle(window)
    asked = []
    monkeypatch.setattr(window.experiment, "ask_value", lambda *a: asked.append(a) or 7.0)
    canvas = window.matrix_view.canvas
    canvas.setFocus()
    window.matrix_view.selection.select(0, 2, 3)
    qtbot.keyClick(canvas, Qt.Key.Key_F2)
    settle(window)
    assert asked and asked[0][1] == (1, 2, 3)
    assert window.experiment.edits == [Edit("q", (1, 2, 3), 7.0)]
    assert window.state.display.trace["q"].array[1, 2, 3] == 7.0
