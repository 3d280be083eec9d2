"""RunSpec: one frozen request; JSON round trips equal; its fields are the option table's rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.config import InputError
from models.engine.edits import Edit, hide_key
from models.engine.held_arrays import HeldArrays
from models.fields import FIELDS
from models.run_engine import trace
from models.runspec import RunSpec


def _round_trip(spec: RunSpec) -> RunSpec:
    doc = json.loads(json.dumps(spec.to_json("run/")))  # through text, as a session stores it
    return RunSpec.from_json(doc, {name: np.array(a) for name, a in spec.arrays.items()})


def test_a_toy_run_with_a_custom_mask_and_weights_round_trips_equal():
    rng = np.random.default_rng(0)
    arrays = {"mask": np.triu(np.ones((3, 3), bool), 1), **{f"weights/{k}": rng.standard_normal((2, 8, 4))
                                                            for k in ("W_q", "W_k", "W_v")}}  # fmt: skip
    spec = RunSpec(sentence="the cat sat", heads=2, d_model=8, mask="custom", pe="sinusoidal", temperature=0.5,
                   bias=True, pad_positions=(1,), arrays=HeldArrays(arrays), edits=(hide_key(2, 0),), difference=True)
    back = _round_trip(spec)
    assert back == spec and hash(back) == hash(spec) and back.validate() is back
    assert spec.to_json()["options"]["temperature"] == 0.5 and "heads" not in spec.to_json()["options"]  # a default
    assert back.replace(arrays=HeldArrays({**arrays, "mask": ~arrays["mask"]})) != spec  # arrays count, by value


def test_a_model_run_with_edits_round_trips_equal():
    spec = RunSpec(model="minilm", sentence="The cat sat.", layer=3, mask="causal", pad_positions=(2,),
                   edits=(Edit("q", (0, 1, 2), 5.0), hide_key(3, 1)))  # fmt: skip
    assert _round_trip(spec) == spec and spec.validate() is spec


def test_an_encoder_decoder_run_round_trips_equal():
    spec = RunSpec(model="t5-small", sentence="The house is wonderful.", cross_sentence="Das Haus", block="encoder",
                   layer=1)  # fmt: skip
    back = _round_trip(spec)
    assert back == spec and (back.cross_sentence, back.block) == ("Das Haus", "encoder")


def test_a_step_of_the_induction_model_round_trips_and_traces_that_step():
    spec = RunSpec(model="induction", step="first", sentence="a b c a b", layer=1)
    back = _round_trip(spec)
    assert back == spec and back.step == "first"
    first, last = trace(back), trace(back.replace(step=None))
    assert not np.array_equal(first["weights"].array, last["weights"].array)  # another step, other weights


def test_every_stored_option_of_the_table_is_a_field_and_the_one_validator_refuses_by_the_table():
    names = set(RunSpec.__dataclass_fields__)
    assert {f.dest for f in FIELDS if f.stored and not f.array} <= names and "all_layers" not in names
    with pytest.raises(InputError, match="--heads does not apply with --model"):
        RunSpec(model="minilm", sentence="a", heads=4).validate()
    with pytest.raises(InputError, match="--layer applies only with --model"):
        RunSpec(sentence="a", layer=2).validate()
    with pytest.raises(InputError, match="option heads must be an integer"):
        RunSpec.from_json({"runspec": 1, "options": {"heads": "2"}})
    with pytest.raises(InputError, match="newer runspec"):
        RunSpec.from_json({"runspec": 2, "options": {}})
