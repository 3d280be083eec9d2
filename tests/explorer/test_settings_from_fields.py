"""The saved settings come from the option table (issue 17): which inputs are saved, and how each is
checked, are the FIELDS rows (models/fields.py) plus a few named window-only rows; each option's range
is in its row, and the settings, RunSpec and the window's boxes refuse what is outside it alike."""

from __future__ import annotations

import dataclasses
import json

import pytest

from explorer.app import build_parser, inputs_from_args
from explorer.files.persistence import SAVED, inputs_from_dict, inputs_to_dict
from explorer.inputs import FOR_THIS_RUN, NOT_OFFERED, NOT_SAVED, WINDOW_ROWS, Inputs, input_rows, make_inputs
from explorer.state import ExplorerState
from explorer.usage import UsageError
from explorer.widgets.settings_panel import AUTO, HAND_MADE, SettingsPanel
from models.errors import InputError
from models.fields import BY_DEST, FIELDS, Field
from models.runspec import RunSpec

WINDOW_ONLY = {f.dest for f in WINDOW_ROWS}


def test_every_saved_input_is_a_fields_row_or_a_named_window_only_one():
    assert set(SAVED) <= set(BY_DEST) | WINDOW_ONLY
    assert WINDOW_ONLY == {"cross_enabled", "pe", "model_mask"}  # pe: the pe row's choice as a checkbox
    for name, row in SAVED.items():
        assert row is (next(f for f in WINDOW_ROWS if f.dest == name) if name in WINDOW_ONLY else BY_DEST[name])
    # What is not saved is named: the command line's files (the array rows' *_file) and what they bring,
    # and what a session brings for one run.
    files = {f"{f.array}_file" for f in FIELDS if f.array}
    unsaved = {f.name for f in dataclasses.fields(Inputs)} - set(SAVED)
    assert unsaved == files | set(FOR_THIS_RUN) | set(NOT_SAVED)
    assert not unsaved & set(inputs_to_dict(Inputs()))


def test_a_new_fields_row_is_an_input_saved_restored_and_checked_with_nothing_else_written():
    """A new option is one row of the table: the form has it (its default), saves it, restores it and
    checks it by its range, as RunSpec and the command line do."""
    row = Field("window_size", "attention", "toy", "a made-up option", type=int, default=3, low=1, shown=(1, 9))
    wider = make_inputs((*FIELDS, row))
    assert wider().window_size == 3 and not hasattr(Inputs(), "window_size")
    saved = {name: r for name, r in input_rows((*FIELDS, row)).items() if r is not None}
    assert saved["window_size"] is row
    data = inputs_to_dict(wider(window_size=7, heads=4), saved)
    assert data["window_size"] == 7
    assert inputs_from_dict(data, saved=saved, default=wider()) == wider(window_size=7, heads=4)
    for bad in (0, 10, "7", 7.0, True):  # out of the row's range (the window's), or not an integer
        problems: list[str] = []
        assert inputs_from_dict({"window_size": bad}, problems, saved, wider()).window_size == 3
        assert problems == [f"window_size {json.dumps(bad)}"]


def test_the_form_is_the_option_tables_rows_the_window_offers():
    """No second list of options: each input is a row of FIELDS (an array row as its file's path), a
    window row, or one of what a session brings; every row the window offers is an input."""
    names = [f.name for f in dataclasses.fields(Inputs)]
    offered = [f.dest if f.array is None else f"{f.array}_file" for f in FIELDS
               if f.stored and f.dest not in NOT_OFFERED]  # fmt: skip
    assert set(names) == set(offered) | WINDOW_ONLY | set(NOT_SAVED)
    assert len(names) == len(set(names))
    assert {name: getattr(Inputs(), name) for name in ("heads", "d_model", "score", "temperature", "seed")} == {
        name: BY_DEST[name].default for name in ("heads", "d_model", "score", "temperature", "seed")}


@pytest.fixture
def panel(qtbot):
    widget = SettingsPanel(ExplorerState(), "cpu")
    qtbot.addWidget(widget)
    return widget


def test_the_boxes_offer_exactly_the_rows_window_ranges(panel):
    for name in ("heads", "d_model", "d_k", "d_v", "temperature", "seed"):
        box = getattr(panel, name)
        low, high = BY_DEST[name].window_range
        assert (box.minimum(), box.maximum()) == ((AUTO if name in ("d_k", "d_v") else low), high), name
    assert tuple(panel.mask.itemData(i) for i in range(panel.mask.count())) == BY_DEST["mask"].choices


@pytest.mark.parametrize("name, value", [("heads", 0), ("d_model", 0), ("d_k", -3), ("seed", -1)])
def test_a_value_outside_the_rows_range_is_refused_by_settings_runspec_and_box(panel, name, value):
    problems: list[str] = []
    assert getattr(inputs_from_dict({name: value}, problems), name) == getattr(Inputs(), name)
    assert problems == [f"{name} {value}"]
    with pytest.raises(InputError):
        RunSpec.from_json({"runspec": 1, "options": {"sentence": "a b", name: value}})
    with pytest.raises(InputError):
        RunSpec(sentence="a b", **{name: value}).validate()
    box = getattr(panel, name)
    box.setValue(value)
    assert box.value() != value  # a box cannot hold it either


@pytest.mark.parametrize("name, value, others", [("heads", 65, {"d_k": 4}), ("d_k", 2000, {}),
                                                 ("temperature", 0.01, {}), ("layer", 10_000, None)])  # fmt: skip
def test_a_value_beyond_what_the_window_shows_is_refused_by_the_window_and_taken_by_export(panel, name, value,
                                                                                           others):  # fmt: skip
    row = BY_DEST[name]
    assert not row.in_range(value, window=True) and row.in_range(value)
    problems: list[str] = []
    assert getattr(inputs_from_dict({name: value}, problems), name) == getattr(Inputs(), name)
    assert problems == [f"{name} {value}"]
    argv = [row.option, str(value)] + (["--model", "minilm"] if name == "layer" else [])
    with pytest.raises(UsageError, match="outside what the window shows .*use 'main.py export'"):
        inputs_from_args(build_parser().parse_args(argv), Inputs())
    if others is not None:  # export takes it (a temperature of 1e-45, a d_k of 40000: no box shows them)
        options = {"sentence": "a b", name: value, **others}
        assert RunSpec.from_json({"runspec": 1, "options": options}).validate()
        box = getattr(panel, name)
        box.setValue(value)
        assert box.value() != value


def test_a_new_row_gets_a_box_in_the_settings_panel_that_edits_the_input(qtbot):
    """The last piece of "a new option is one row": the window offers it, a box made from the row
    (its range, its help as tooltip), disabled while a model is chosen when it is a toy option."""
    row = Field("window_size", "attention", "toy", "a made-up option", type=int, default=3, low=1, shown=(1, 9))
    flag = Field("tie_heads", "attention", "both", "another made-up option", type=None, flag=True, default=False)
    wider = make_inputs((*FIELDS, row, flag))
    state = ExplorerState(wider(sentence="a b c"))
    panel = SettingsPanel(state, "cpu")
    qtbot.addWidget(panel)
    assert set(panel.row_boxes) == {"window_size", "tie_heads"}
    box = panel.row_boxes["window_size"].widget
    assert (box.minimum(), box.maximum(), box.value(), box.toolTip()) == (1, 9, 3, "a made-up option")
    box.setValue(7)
    assert state.inputs.window_size == 7
    panel.row_boxes["tie_heads"].widget.setChecked(True)
    assert state.inputs.tie_heads is True
    state.update_inputs(window_size=5)  # the state changed elsewhere (a session, the command line)
    assert box.value() == 5
    state.update_inputs(model="minilm")
    assert not box.isEnabled() and panel.row_boxes["tie_heads"].widget.isEnabled()


def test_every_input_the_window_saves_has_a_control_written_for_it_today():
    """No box is made from a row for the options there are now: each has its own control."""
    assert set(SAVED) <= set(HAND_MADE)


def test_a_new_list_row_is_written_and_read_as_its_command_line_text(qtbot):
    from models.fields import positions

    row = Field("sink_positions", "attention", "toy", "made-up positions", type=positions, default=())
    state = ExplorerState(make_inputs((*FIELDS, row))(sentence="a b c"))
    panel = SettingsPanel(state, "cpu")
    qtbot.addWidget(panel)
    box = panel.row_boxes["sink_positions"].widget
    box.setText("4, 2,2")
    box.editingFinished.emit()
    assert state.inputs.sink_positions == (2, 4)
    box.setText("two")
    box.editingFinished.emit()
    assert state.inputs.sink_positions == (2, 4) and "expected comma-separated integers" in box.toolTip()
    state.update_inputs(sink_positions=(1,))
    assert box.text() == "1"
