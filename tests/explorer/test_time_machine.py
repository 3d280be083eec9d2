"""File → Time machine…: a broken history named in red first, the slider calling back with each
step's folder, the events list moving the slider, and the why series drawn as its terms."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from explorer.engine.time_machine_data import build_time_machine
from explorer.panels.time_machine_window import TimeMachineWindow, largest_terms
from models.history.integrity import CACHE_ENV
from models.pretrained.steps import model_steps

SHIPPED = Path(__file__).resolve().parents[2] / "resources" / "models" / "induction"
REPEATED = "k78lt2nxawscgzef4j1qh69ibu305ok78lt2nxawscgzef4j1qh69ibu305o"


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory):
    """Steps 583, 1007 and 2500 of the shipped run, 2500's weights copied over 1007's."""
    root = tmp_path_factory.mktemp("broken")
    shipped = model_steps(SHIPPED)
    for step in (583, 839, 1007, 2500):
        shutil.copytree(shipped[step], root / "checkpoints" / f"step-{step:06d}")
    shutil.copy2(SHIPPED / "losses.csv", root / "losses.csv")
    shutil.copy2(shipped[2500] / "model.safetensors", root / "checkpoints" / "step-001007" / "model.safetensors")
    return root


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))


def test_a_broken_history_is_named_and_the_slider_follows(qtbot, broken_run):
    tm = build_time_machine(str(broken_run), REPEATED, layer=1, cell=(0, 40, 11))
    seen = []
    window = TimeMachineWindow(tm, seen.append)
    qtbot.addWidget(window)
    assert window.banner.text().startswith("step 1007 and step 2500 hold the same weights: this history is broken")
    assert "b00020" in window.banner.styleSheet()
    assert window.step == 2500 and seen[-1] == tm.paths[-1]
    assert "same weights as step 1007" in window.step_label.text()
    window.set_step(583)
    assert seen[-1] == tm.paths[0] and window.step_label.text() == "583"
    assert window.events.count() == max(1, len(tm.history.events))
    if tm.history.events:  # a click on an event moves the slider to its later step
        window.events.setCurrentRow(0)
        assert window.step == tm.history.events[0].step_after
    # the grid: similarity 1 where a step's weights equal the previous step's (2500 after 1007)
    np.testing.assert_allclose(tm.similarity(tm.steps.index(2500)), 1.0, atol=1e-5)


def test_the_why_series_adds_up_to_the_score_in_the_plot(qtbot, broken_run):
    tm = build_time_machine(str(broken_run), REPEATED, layer=1, cell=(0, 40, 11))
    assert tm.why is not None and tm.why["steps"] == tm.steps
    terms = largest_terms(tm.why, count=3)
    assert len(terms) == 4 and terms[-1][0].endswith("others")
    total = np.sum([values for _, values in terms], axis=0)
    np.testing.assert_allclose(total, tm.why["score"], rtol=1e-5, atol=1e-5)
    window = TimeMachineWindow(tm)
    qtbot.addWidget(window)
    assert "Why L1 H0 scores key 11" in window.why_plot.getPlotItem().titleLabel.text


def test_a_model_without_checkpoints_is_one_line():
    from models.config import InputError

    with pytest.raises(InputError, match="has no training steps"):
        build_time_machine("minilm", "The cat sat.", 0)
