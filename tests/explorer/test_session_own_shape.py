"""The rows the window's form holds in a shape of its own (the sentences, labels, the mask, pad
positions, positions as a checkbox, the model) are one mapping, derived from the option table's
``own_shape`` flag (explorer/inputs.py: ``own_shape``): ``Inputs.to_runspec``, session_io's
``inputs_from_spec`` and ``not_shown`` all read it. Before, each named the 8 rows by hand: turning a row
into one that passes as it is meant editing three places."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from explorer.inputs import OWN_SHAPE, Inputs
from models.fields import FIELDS

PROJECT = ("models", "explorer")


def test_the_mapping_is_the_tables_flagged_rows_with_the_forms_attribute():
    assert [dest for dest, _ in OWN_SHAPE] == [f.dest for f in FIELDS if f.own_shape]
    assert Inputs.own_shape == OWN_SHAPE and len(OWN_SHAPE) == 8
    assert ("mask", "model_mask") in OWN_SHAPE  # a model's mask is the form's model_mask
    assert all(hasattr(Inputs(), attribute) for _, attribute in OWN_SHAPE)


@pytest.fixture
def flipped(monkeypatch):
    """``flip(dest)``: the project imported afresh with that row's ``own_shape`` flag turned over."""
    import models.fields as fields

    def flip(dest: str):
        for name in [name for name in sys.modules if name.split(".")[0] in PROJECT and name != "models.fields"]:
            monkeypatch.delitem(sys.modules, name)
        table = tuple(dataclasses.replace(f, own_shape=not f.own_shape) if f.dest == dest else f for f in fields.FIELDS)
        monkeypatch.setattr(fields, "FIELDS", table)
        for name, value in fields.tables(table).items():
            monkeypatch.setattr(fields, name, value)
        import explorer.files.session_io as session_io
        import explorer.inputs as inputs

        return inputs, session_io

    yield flip
    for name in [name for name in sys.modules if name.split(".")[0] in PROJECT]:
        del sys.modules[name]  # the modules made for the flipped table; the monkeypatch puts the others back


def _ends(inputs, session_io):
    """What the three readers make of a toy form with held embeddings and a spec without a sentence."""
    import numpy as np

    from models.engine.held_arrays import HeldArrays
    from models.runspec import RunSpec

    form = inputs.Inputs(sentence="the cat sat", d_model=4, held=HeldArrays({"embeddings": np.ones((3, 4))}))
    spec = form.to_runspec()
    back, _ = session_io.inputs_from_spec(RunSpec(heads=2, d_model=4), inputs.Inputs(sentence="what was there"))
    return spec.sentence, back.sentence, {row.dest for row in session_io.not_shown(inputs.Inputs)}


def test_turning_a_rows_flag_over_changes_all_three_readers(flipped):
    import explorer.files.session_io as session_io
    import explorer.inputs as inputs

    # As shipped: the sentence waits behind held embeddings, and a spec without one keeps the form's.
    to_spec, from_spec, hidden = _ends(inputs, session_io)
    assert (to_spec, from_spec) == (None, "what was there") and "device" in hidden
    # The sentence's flag off: it passes to and from a RunSpec as it is, in both directions at once.
    inputs, session_io = flipped("sentence")
    assert "sentence" not in {dest for dest, _ in inputs.Inputs.own_shape}
    assert "sentence" in {row.dest for row in inputs.passed_rows(inputs.Inputs, "toy")}
    to_spec, from_spec, _ = _ends(inputs, session_io)
    assert (to_spec, from_spec) == ("the cat sat", inputs.DEFAULT_SENTENCE)


def test_a_row_the_form_lacks_flagged_leaves_what_a_session_cannot_show(flipped):
    inputs, session_io = flipped("device")
    assert ("device", "device") in inputs.Inputs.own_shape
    assert "device" not in {row.dest for row in session_io.not_shown(inputs.Inputs)}
