"""gpt-oss in the window: the sink is the weights' last key column, labelled, and it cannot be
hidden like a key (Alt+click); the query focus lists it without a value row."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.state import Inputs

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def gpt_oss_folder(tmp_path_factory):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
    from test_pretrained_families_2 import build

    folder = tmp_path_factory.mktemp("gpt_oss")
    build(folder, "gpt_oss-sinks-moe")
    return folder


def test_the_sink_column_is_shown_and_cannot_be_hidden(qtbot, make_window, settle, gpt_oss_folder):
    window = make_window(Inputs(sentence="the cat sat on the mat", model=str(gpt_oss_folder), layer=0))
    trace = window.state.display.trace
    n = len(trace.key_tokens)
    weights = trace["weights"]
    assert weights.shape[-1] == n + 1 and weights.col_labels[-1] == "sink"
    assert window.key_hider.toggle(2, n) is False  # the sink's column
    assert "sink is not a key" in window.status_line.plain_text() and window.experiment.edits == []
    assert window.key_hider.toggle(2, 1) is True  # a real key still hides
    settle(window)
    assert window.state.display.trace["weights"].array[:, 2, 1].max() == 0.0


def test_the_sink_logit_cannot_be_edited_like_a_score(qtbot, make_window, settle, gpt_oss_folder, monkeypatch):
    window = make_window(Inputs(sentence="the cat sat on the mat", model=str(gpt_oss_folder), layer=1))
    n = len(window.state.display.trace.key_tokens)
    window.resize(1400, 900)
    window.state.set_stage("scores")
    qtbot.waitUntil(lambda: window.state.stepper.stage.name == "scores" and window.matrix_view.settled())
    monkeypatch.setattr(window.experiment, "ask_value", lambda *a: 3.0)
    assert window.experiment.edit_cell(0, 2, n) is False  # the sink's column
    assert "cannot be edited" in window.status_line.plain_text() and window.experiment.edits == []
    assert window.experiment.edit_cell(0, 2, 1) is True  # a real score can be
    settle(window)
    assert window.state.display.trace["scores"].array[0, 2, 1] == 3.0


def test_clicking_the_sink_column_explains_the_sink(qtbot, make_window, gpt_oss_folder):
    from mouse import cell_point
    from PySide6.QtCore import Qt

    window = make_window(Inputs(sentence="the cat sat on the mat", model=str(gpt_oss_folder), layer=0))
    window.resize(1400, 900)
    n = len(window.state.display.trace.key_tokens)
    for stage, title in (("weights", "Weight"), ("scores", "Sink logit")):
        window.state.set_stage(stage)
        view = window.matrix_view
        qtbot.waitUntil(lambda: view.state.stepper.stage.name == stage and view.settled())  # noqa: B023
        qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 0, 4, n))
        qtbot.waitUntil(lambda: window.inspector.inspector.derivation is not None
                        and window.inspector.inspector.derivation.stage == stage)  # noqa: B023
        d = window.inspector.inspector.derivation
        assert tuple(d.cell) == (0, 4, n) and d.title.startswith(title) and "'sink'" in d.title


def test_the_whole_model_view_shows_the_real_keys_weights(qtbot, make_window, gpt_oss_folder):
    window = make_window(Inputs(sentence="the cat sat on the mat", model=str(gpt_oss_folder), layer=0), persist=False)
    n = len(window.state.display.trace.key_tokens)
    survey = window.windows.open_survey(model=True)
    qtbot.addWidget(survey)
    qtbot.waitUntil(lambda: survey.panel.survey is not None, timeout=60_000)
    weights = survey.panel.survey.weights  # as transformers' attentions: the sink's share left out
    assert weights.shape == (3, 4, n, n) and weights.sum(-1).max() < 1
    np.testing.assert_allclose(weights[0], window.state.display.trace["weights"].array[..., :n], atol=1e-6)
