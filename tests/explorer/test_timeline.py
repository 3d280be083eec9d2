"""The training timeline: its data, its slider and the main window following it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PySide6.QtGui import QImage

from explorer.engine.timeline_data import build_timeline, history_folder
from explorer.panels.timeline_window import TimelineWindow
from models.config import InputError
from models.training.data import DataConfig
from models.training.train import TrainConfig, train
from tests.explorer.conftest import SMALL

RUN = TrainConfig(steps=6, checkpoints=4, batch_size=4, lr=2e-2, data=DataConfig(seq_len=32, max_block=12))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    train(out, RUN)
    return out


def test_timeline_data(run):
    t = build_timeline(str(run), "abcdabcd")
    assert t.steps[0] == 0 and t.steps[-1] == 6 and len(t.paths) == len(t.steps)
    assert t.scores["induction"].shape == (len(t.steps), 2, 4)
    assert history_folder(str(t.paths[1])) == run  # a step folder leads back to its history
    x, y = t.loss_series("heldout_repeated_loss")
    assert len(x) == len(t.steps) and np.isfinite(y).all()


def test_slider_calls_back_with_each_step(qtbot, run):
    seen, heads = [], []
    window = TimelineWindow(build_timeline(str(run), "abcdabcd"), seen.append, lambda *a: heads.append(a))
    qtbot.addWidget(window)
    assert seen[-1] == run / "checkpoints" / "step-000006"  # opens at the last step
    window.slider.setValue(0)
    assert seen[-1] == run / "checkpoints" / "step-000000" and window.step == 0
    window.curves[("induction", 1, 2)].sigClicked.emit(window.curves[("induction", 1, 2)], None)
    assert heads == [(run / "checkpoints" / "step-000000", 1, 2)]


def test_main_window_follows_the_slider(qtbot, make_window, settle, run):
    window = make_window(dataclasses.replace(SMALL, model=str(run), sentence="abcdabcd"))
    timeline = window.windows.open_timeline()
    qtbot.addWidget(timeline)
    settle(window)
    last = window.state.display.trace
    timeline.slider.setValue(0)
    settle(window)
    first = window.state.display.trace
    assert window.state.inputs.model.endswith("step-000000")
    assert not np.allclose(last["weights"].array, first["weights"].array)


def test_a_step_folder_opens_its_history_and_a_model_without_one_says_why(qtbot, make_window, run):
    window = make_window(dataclasses.replace(SMALL, model=str(run / "checkpoints" / "step-000000"), sentence="ab"))
    timeline = window.windows.open_timeline()
    qtbot.addWidget(timeline)
    assert timeline.timeline.folder == run
    with pytest.raises(InputError, match="no training steps"):
        build_timeline(str(run / "checkpoints" / "step-000000"), "ab", history=False)


def test_the_model_list_names_the_step_and_keeps_one_item_per_run(qtbot, make_window, settle, run):
    """The slider visits a folder per step: the model list reads "RUN · step N" and keeps one item
    for the run (it grew by one "step-00000N (folder)" item per step visited)."""
    window = make_window(dataclasses.replace(SMALL, model=str(run), sentence="abcdabcd"))
    timeline = window.windows.open_timeline()
    qtbot.addWidget(timeline)
    settle(window)
    before = len(window.model_chooser.models())
    for index in range(len(timeline.timeline.steps)):
        timeline.slider.setValue(index)
    settle(window)
    assert len(window.model_chooser.models()) == before
    combo = window.model_chooser.combo
    assert combo.currentText() == f"{run.name} · step {timeline.timeline.steps[-1]}  (checkpoint)"


def test_the_timeline_screenshot_from_the_command_line(tmp_path, capsys, isolated_settings):
    """``main.py --timeline --screenshot T --window-screenshot W``: the timeline and the main window
    (issue 50: W is named, never made up beside T); a model with no training history says so (exit 2)
    and writes nothing."""
    from explorer.app import run_app

    out, main = tmp_path / "timeline.png", tmp_path / "main.png"
    assert run_app(["--model", "induction", "--sentence", "abcdabcd", "--timeline", "--screenshot", str(out),
                    "--window-screenshot", str(main)]) == 0  # fmt: skip
    assert QImage(str(out)).width() > 400 and QImage(str(main)).width() > 400
    none = tmp_path / "none.png"
    assert run_app(["--model", "minilm", "--timeline", "--screenshot", str(none)]) == 2
    assert "no training timeline" in capsys.readouterr().err and not none.exists()


def test_one_colour_per_head_and_the_plots_x_axes_line_up(qtbot, run):
    """Issue 35, item 6: the legend gave L0 Hk and L1 Hk the same colour; the loss plot's x axis was
    offset from the score plots' (its y axis was narrower)."""
    window = TimelineWindow(build_timeline(str(run), "abcdabcd"), lambda *_a: None, lambda *_a: None)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    for score in ("previous", "induction"):
        colours = {curve.opts["pen"].color().name() for (s, _l, _h), curve in window.curves.items() if s == score}
        assert len(colours) == 8  # 2 layers × 4 heads
    qtbot.wait(50)
    lefts = {round(window.plots.getItem(row, 0).getViewBox().sceneBoundingRect().left()) for row in range(3)}
    assert len(lefts) == 1, lefts


def test_a_step_of_the_slider_lays_nothing_out_again(qtbot, make_window, settle, run):
    """Each step switches models: their facts go ("Loading…") and come back. The model's box grew and
    shrank with them, the left column followed its minimum both ways, and at the window's least width
    the heatmaps were resized and painted again twice per step (a step: 35 -> 60 ms)."""
    from PySide6.QtCore import QEvent, QObject

    window = make_window(dataclasses.replace(SMALL, model=str(run), sentence="abcdabcd" * 4))
    window.resize(window.minimumSizeHint().width(), 800)  # least width: every column at its minimum
    timeline = window.windows.open_timeline()
    qtbot.addWidget(timeline)
    settle(window)
    timeline.slider.setValue(1)
    settle(window)
    resized = []

    class Resizes(QObject):
        def eventFilter(self, watched, event):  # noqa: N802 - Qt API
            if event.type() == QEvent.Type.Resize:
                resized.append(type(watched).__name__)
            return False

    counter = Resizes()
    for widget in (window.matrix_view.canvas, window.model_chooser, window.model_chooser.info):
        widget.installEventFilter(counter)
    for step in (2, 3, 0, 1):
        timeline.slider.setValue(step)
        settle(window)
        qtbot.wait(20)
        assert window.state.inputs.model.endswith(f"step-{timeline.timeline.steps[step]:06d}")
    assert resized == []


def test_a_layer_chosen_while_a_model_loads_is_not_held_to_the_last_model_s_range(make_window, settle, run):
    """The model's box keeps its room while the next model loads, not the last model's layer range: the
    trained run has 2 layers, MiniLM 6, and layer 4 may be chosen before MiniLM's first trace."""
    window = make_window(dataclasses.replace(SMALL, model=str(run), sentence="abcdabcd"))
    assert window.model_chooser.layer.maximum() == 1
    window.state.update_inputs(model="minilm")
    assert window.state.model_info is None  # its facts come with its first trace
    window.model_chooser.layer.setValue(4)
    settle(window, timeout=60_000)
    assert window.state.inputs.layer == 4 and window.state.display.trace.meta["layer"] == 4
    assert window.model_chooser.layer.maximum() == 5
