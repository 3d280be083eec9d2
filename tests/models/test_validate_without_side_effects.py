"""Checks without side effects (issue 31): validating a request reads no file and calls no torch;
what needs either happens where the run happens (the worker, export's trace). Before, validate()
ran the toy's pipeline (torch) and looked for the model on disk, on whatever thread asked."""

from __future__ import annotations

import builtins
import contextlib
import io
import os

import numpy as np
import pytest
import torch

from models.config import InputError
from models.engine.edits import Edit, edit_shapes
from models.engine.held_arrays import HeldArrays
from models.engine.pipeline import run
from models.request_checks import toy_edit_shapes
from models.run_engine import toy_request
from models.runspec import RunSpec

RNG = np.random.default_rng(0)
SPECS = {
    "sentence": RunSpec(sentence="the cat sat on the mat", heads=2, d_model=8, mask="causal"),
    "padding": RunSpec(sentence="the cat sat", mask="padding", pad_positions=(2,)),
    "cross": RunSpec(sentence="the cat sat", cross_sentence="die Katze", heads=3, d_model=6, d_k=3, d_v=5),
    "arrays": RunSpec(heads=2, d_model=4, mask="custom", arrays=HeldArrays({
        "embeddings": RNG.standard_normal((3, 4)), "mask": np.eye(3, dtype=bool),
        **{f"weights/{k}": RNG.standard_normal((2, 4, 2)) for k in ("W_q", "W_k", "W_v")}})),  # fmt: skip
    "edits": RunSpec(sentence="a b c", edits=(Edit("q", (1, 2, 0), 2.0), Edit("scores", (0, 2, 1), -1.0),
                                                Edit("mask", (0, 2), 1.0))),  # fmt: skip
    "model": RunSpec(model="surely-not-on-disk", sentence="a b", layer=3, edits=(Edit("q", (0, 0, 0), 1.0),)),
}
REFUSED = {
    "pads past the sentence": (RunSpec(sentence="a b c", mask="padding", pad_positions=(5,)), "pad position(s) [5]"),
    "edit outside": (RunSpec(sentence="a b", edits=(Edit("q", (0, 2, 0), 1.0),)), "outside its shape [2, 2, 8]"),
    "embeddings width": (RunSpec(d_model=8, arrays=HeldArrays({"embeddings": np.ones((3, 4))})),
                         "embeddings has 4 columns but d_model is 8"),  # fmt: skip
    "custom mask shape": (RunSpec(sentence="a b c", mask="custom", arrays=HeldArrays({"mask": np.eye(2, dtype=bool)})),
                          "custom mask has shape (2, 2), expected (3, 3)"),  # fmt: skip
    "empty sentence": (RunSpec(sentence="  "), "the sentence is empty"),
}


class SideEffect(AssertionError):
    pass


@contextlib.contextmanager
def no_files_no_torch():
    """While inside: opening a file or calling a function of torch raises :class:`SideEffect`."""

    def refuse(*args, **kwargs):
        raise SideEffect("a file was opened or torch was called while validating")

    with pytest.MonkeyPatch.context() as mp:
        for module, name in ((builtins, "open"), (io, "open"), (os, "open")):
            mp.setattr(module, name, refuse)
        for name in dir(torch):
            if not name.startswith("_") and callable(obj := getattr(torch, name)) and not isinstance(obj, type):
                mp.setattr(torch, name, refuse)
        yield


@pytest.mark.parametrize("name", SPECS)
def test_validate_reads_no_file_and_calls_no_torch(name):
    with no_files_no_torch():
        validated = SPECS[name].validate()
    assert validated is SPECS[name]


@pytest.mark.parametrize("name", REFUSED)
def test_what_validate_refuses_it_refuses_without_a_file_or_torch(name):
    spec, words = REFUSED[name]
    with pytest.raises(InputError) as refused, no_files_no_torch():
        spec.validate()
    assert words in str(refused.value)


def test_the_patches_catch_a_file_and_torch():
    with pytest.raises(SideEffect), no_files_no_torch():
        open(__file__)
    with pytest.raises(SideEffect), no_files_no_torch():
        torch.zeros(2)


def test_the_run_refuses_what_needs_the_model_on_disk():
    spec = SPECS["model"].validate()  # validated: the model is looked for where the run happens
    with pytest.raises(InputError, match="no model 'surely-not-on-disk'"):
        spec.resolve()


@pytest.mark.parametrize("name", ["sentence", "padding", "cross", "arrays", "edits"])
def test_the_toys_edit_shapes_from_its_sizes_are_its_traces(name):
    request = toy_request(SPECS[name])
    trace = run(request)
    shapes = toy_edit_shapes(request.config, len(trace.query_tokens), len(trace.key_tokens), request.is_cross)
    assert shapes == edit_shapes(trace)
