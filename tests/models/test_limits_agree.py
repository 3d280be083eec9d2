"""The option rows (models/fields.py) and the toy's settings (AttentionConfig.validate) accept and
refuse alike: one source, models/limits.py, and every bound tried ±1 on both (issue 46)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from models import limits
from models.config import AttentionConfig, InputError
from models.fields import FIELDS
from models.runspec import RunSpec

CONFIG_FIELDS = {f.name: f for f in dataclasses.fields(AttentionConfig)}
RANGED_ROWS = [f for f in FIELDS if f.range != (None, None)]
SHARED_RANGED = [f for f in RANGED_ROWS if f.dest in CONFIG_FIELDS]
SHARED_CHOICES = [f for f in FIELDS if f.choices and f.dest in CONFIG_FIELDS]


def config_accepts(**values) -> bool:
    base = {} if "d_k" in values else {"d_k": 4}  # heads and d_model tried alone: no divisibility rule
    try:
        AttentionConfig(**base | values).validate()
    except InputError:
        return False
    return True


def test_every_row_range_and_choice_comes_from_limits():
    """No row writes a number or a list of its own: its range and choices are those of models/limits.py."""
    for f in RANGED_ROWS:
        assert f.dest in limits.RANGES, f"{f.option} has a range of its own; put it in models/limits.py"
        assert f.range == limits.RANGES[f.dest], f.option
    for f in (f for f in FIELDS if f.choices and f.dest in limits.CHOICES):
        assert f.choices == limits.CHOICES[f.dest], f.option
    assert {f.dest for f in SHARED_RANGED} >= {"heads", "d_model", "d_k", "d_v", "d_out", "seed", "max_tokens"}
    assert {f.dest for f in SHARED_CHOICES} == {"mask", "score", "pe", "device"}


@pytest.mark.parametrize("row", SHARED_RANGED, ids=lambda f: f.dest)
def test_bounds_accepted_and_refused_alike(row):
    tried = 0
    for bound in (b for b in row.range if b is not None):
        for value in (bound - 1, bound, bound + 1):
            assert row.in_range(value) == config_accepts(**{row.dest: value}), (row.dest, value)
            tried += 1
    assert tried >= 3
    assert config_accepts(**{row.dest: row.range[0]}) and not config_accepts(**{row.dest: row.range[0] - 1})


@pytest.mark.parametrize("row", SHARED_CHOICES, ids=lambda f: f.dest)
def test_choices_accepted_and_refused_alike(row):
    for choice in row.choices:
        assert row.from_json(choice) == choice and config_accepts(**{row.dest: choice}), (row.dest, choice)
    assert not config_accepts(**{row.dest: "bogus"})
    with pytest.raises(InputError):
        row.from_json("bogus")


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf])
def test_temperature_refused_by_every_reader(value):
    """No row's ``low`` says "above 0" (its bound is included): the one rule is limits.POSITIVE, and
    RunSpec.validate (export, explain, a RunSpec's JSON) runs it through AttentionConfig.validate."""
    assert "temperature" in limits.POSITIVE and not config_accepts(temperature=value)
    with pytest.raises(InputError, match="temperature must be a positive number"):
        RunSpec(sentence="a b", temperature=value).validate()
    RunSpec(sentence="a b", temperature=1e-45).validate()


def test_range_messages_name_the_range():
    with pytest.raises(InputError, match=r"^heads must be a positive integer, got 0$"):
        AttentionConfig(heads=0).validate()
    with pytest.raises(InputError, match=r"^seed must be an integer from 0 to 2\*\*63-1"):
        AttentionConfig(seed=limits.MAX_SEED + 1).validate()
    with pytest.raises(InputError, match=r"^--seed must be from 0 to 9223372036854775807, got -1$"):
        [f for f in FIELDS if f.dest == "seed"][0].check_range(-1)


def test_a_bool_width_differs_between_readers():
    """Kept as it was (issue 46 changed no behaviour): a RunSpec's JSON refuses ``true`` for an integer
    row, while AttentionConfig's isinstance check takes True as 1. Change one only with the other."""
    heads = [f for f in FIELDS if f.dest == "heads"][0]
    with pytest.raises(InputError, match="must be an integer"):
        heads.from_json(True)
    assert config_accepts(heads=True)


def test_defaults_agree():
    """AttentionConfig's defaults are its rows' (a row's mask None is "the model's own": "none" for the toy)."""
    own = {"mask": "none"}
    for f in FIELDS:
        if f.dest in CONFIG_FIELDS:
            assert CONFIG_FIELDS[f.dest].default == own.get(f.dest, f.default), f.dest
