"""The saved settings come from the option table (issue 17): which inputs are saved, and how each is
checked, are the FIELDS rows (models/fields.py) plus a few named window-only rows; each option's range
is in its row, and the settings, RunSpec and the window's boxes refuse what is outside it alike."""

from __future__ import annotations

import dataclasses
import json

import pytest

from explorer.app import build_parser, inputs_from_args
from explorer.files.persistence import SAVED, inputs_from_dict, inputs_to_dict
from explorer.inputs import FOR_THIS_RUN, NOT_SAVED, WINDOW_ROWS, Inputs, input_rows
from explorer.state import ExplorerState
from explorer.usage import UsageError
from explorer.widgets.settings_panel import AUTO, SettingsPanel
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


def test_an_input_that_is_neither_a_row_nor_named_is_refused():
    stray = dataclasses.make_dataclass("StrayInputs", [("stray", int, dataclasses.field(default=1))],
                                       bases=(Inputs,), frozen=True)  # fmt: skip
    with pytest.raises(ValueError, match="Inputs.stray is neither"):
        input_rows(FIELDS, stray)


def test_a_new_fields_row_with_a_default_is_saved_restored_and_checked():
    row = Field("window_size", "attention", "toy", "a made-up option", type=int, default=3, low=1, shown=(1, 9))
    wider = dataclasses.make_dataclass("WiderInputs", [("window_size", int, dataclasses.field(default=3))],
                                       bases=(Inputs,), frozen=True)  # fmt: skip
    saved = {name: r for name, r in input_rows((*FIELDS, row), wider).items() if r is not None}
    assert saved["window_size"] is row
    data = inputs_to_dict(wider(window_size=7, heads=4), saved)
    assert data["window_size"] == 7
    assert inputs_from_dict(data, saved=saved, default=wider()) == wider(window_size=7, heads=4)
    for bad in (0, 10, "7", 7.0, True):  # out of the row's range (the window's), or not an integer
        problems: list[str] = []
        assert inputs_from_dict({"window_size": bad}, problems, saved, wider()).window_size == 3
        assert problems == [f"window_size {json.dumps(bad)}"]


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
        RunSpec(sentence="a b", **{name: value}).validate(resolve=False)
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
        assert RunSpec.from_json({"runspec": 1, "options": options}).validate(resolve=False)
        box = getattr(panel, name)
        box.setValue(value)
        assert box.value() != value
