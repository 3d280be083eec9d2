"""Fuzzing the settings file (issue 19): whatever the saved inputs hold, reading them gives inputs
the window's controls can show (each bad value replaced by its default and named), never an
exception; the INI text itself may be anything."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.files.persistence import INPUTS_KEY, inputs_from_dict, open_settings, read_inputs
from explorer.state import Inputs
from models.fields import BY_DEST

EXAMPLES = 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
FIELDS = [f.name for f in dataclasses.fields(Inputs)]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8),
                    st.sampled_from([2**40, 10**30, 65, 4097, -1, 0, "padding", "general", "minilm"]))  # fmt: skip
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


def _within(name: str, value) -> bool:
    low, high = BY_DEST[name].window_range  # the one place of ranges: the window's boxes offer exactly it
    return low <= value <= high


def _showable(inputs: Inputs) -> None:
    assert _within("heads", inputs.heads) and _within("d_model", inputs.d_model)
    assert all(v is None or _within(n, v) for n, v in (("d_k", inputs.d_k), ("d_v", inputs.d_v)))
    assert _within("seed", inputs.seed) and _within("layer", inputs.layer)
    assert _within("temperature", inputs.temperature)
    assert all(isinstance(p, int) and p >= 0 for p in inputs.pad_positions)


@FUZZ
@given(data=st.dictionaries(st.sampled_from(FIELDS), values, max_size=5))
def test_fuzz_saved_inputs(data):
    problems: list[str] = []
    inputs = inputs_from_dict(data, problems)
    _showable(inputs)
    changed = {f for f in FIELDS if getattr(inputs, f) != getattr(Inputs(), f)}
    assert changed <= set(data)  # nothing the file did not hold is changed


@FUZZ
@given(text=st.text(max_size=300))
def test_fuzz_settings_file_text(tmp_path, text):
    path = tmp_path / "settings.ini"
    path.write_text(text, encoding="utf-8", errors="replace")
    inputs, _ = read_inputs(open_settings(path))
    _showable(inputs)


@FUZZ
@given(stored=st.text(max_size=120) | st.builds(json.dumps, st.dictionaries(st.sampled_from(FIELDS), values)))
def test_fuzz_stored_inputs_value(tmp_path, stored):
    path = tmp_path / "settings.ini"
    s = open_settings(path)
    s.setValue(INPUTS_KEY, stored)
    s.sync()
    inputs, _ = read_inputs(open_settings(path))
    _showable(inputs)
