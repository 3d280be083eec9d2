"""Session formats: a pinned run's own edits and difference round trip (inside its RunSpec, format
3); files of the earlier writers (formats 1 and 2: option strings, edits beside the run) still
open as the same RunSpecs; arrays given in memory make the same request as their files."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from models.cli.export import build_parser
from models.config import InputError
from models.engine.edits import Edit
from models.engine.held_arrays import HeldArrays
from models.engine.pipeline import materialize, run
from models.files.run_files import spec_from_args
from models.files.session import Session, load_session, save_session
from models.run_engine import toy_request
from models.runspec import RunSpec


def _doc(path):
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read("session.json"))


def test_pinned_edits_and_difference_round_trip_inside_the_pinned_runspec(tmp_path):
    pinned = RunSpec(sentence="a b c d", edits=(Edit("k", (1, 2, 0), -1.5),), difference=True)
    session = Session(RunSpec(sentence="a b c", difference=True), pinned=pinned)
    path = save_session(tmp_path / "s.zip", session)
    doc = _doc(path)
    assert doc["version"] == 3 and doc["pinned"]["edits"] == [{"stage": "k", "cell": [1, 2, 0], "value": -1.5}]
    assert doc["pinned"]["runspec"] == 1 and doc["pinned"]["difference"] is True
    back = load_session(path)
    assert back.pinned == pinned and back.run.difference and back.pinned.edits == pinned.edits


def _old_file(path, doc, members=None):
    """A session as the format-1/2 writer wrote it (options as command-line strings)."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("session.json", json.dumps(doc))
        for name, array in (members or {}).items():
            with zf.open(name, "w") as f:
                np.save(f, array, allow_pickle=False)
    return path


def test_a_format_1_file_of_the_earlier_writer_opens(tmp_path):
    doc = {"format": "attention-explorer-session", "version": 1, "run": {"options": {"--sentence": "a b"},
           "arrays": {}}, "view": {"stage": "q", "head": 0, "query": 1}, "edits": [], "pinned": None}  # fmt: skip
    back = load_session(_old_file(tmp_path / "old.zip", doc))
    assert (back.stage, back.head, back.query, back.run, back.pinned) == ("q", 0, 1, RunSpec(sentence="a b"), None)


def test_a_format_2_file_with_arrays_edits_and_a_pinned_run_opens_as_the_same_runspecs(tmp_path):
    mask = np.tril(np.ones((3, 3), bool), -1)
    w = {k: np.random.default_rng(3).standard_normal((2, 8, 4)) for k in ("W_q", "W_k", "W_v")}
    doc = {"format": "attention-explorer-session", "version": 2,
           "run": {"options": {"--sentence": "the cat sat", "--heads": 2, "--d-model": 8, "--mask": "custom",
                               "--pad-positions": [2, 1], "--bias": True, "--temperature": 0.5, "--pe": "sinusoidal"},
                   "arrays": {"mask": "run/mask.npy", **{f"weights/{k}": f"run/weights/{k}.npy" for k in w}}},
           "view": {"stage": "weights", "head": 1, "query": 2, "difference": True},
           "edits": [{"stage": "q", "cell": [0, 1, 2], "value": 3.0}],
           "pinned": {"options": {"--model": "minilm", "--sentence": "a b", "--layer": 2},
                      "edits": [{"stage": "k", "cell": [0, 0, 0], "value": 1.0}], "difference": True}}  # fmt: skip
    members = {"run/mask.npy": mask, **{f"run/weights/{k}.npy": a for k, a in w.items()}}
    back = load_session(_old_file(tmp_path / "old.zip", doc, members))
    expected = RunSpec(sentence="the cat sat", heads=2, d_model=8, mask="custom", pad_positions=(1, 2), bias=True,
                       temperature=0.5, pe="sinusoidal",
                       arrays=HeldArrays({"mask": mask, **{f"weights/{k}": a for k, a in w.items()}}),
                       edits=(Edit("q", (0, 1, 2), 3.0),), difference=True)  # fmt: skip
    assert back.run == expected and (back.stage, back.head, back.query) == ("weights", 1, 2)
    assert back.pinned == RunSpec(model="minilm", sentence="a b", layer=2, edits=(Edit("k", (0, 0, 0), 1.0),),
                                  difference=True)  # fmt: skip
    again = load_session(save_session(tmp_path / "new.zip", back))  # written again: format 3, the same runs
    assert _doc(tmp_path / "new.zip")["version"] == 3 and again.run == expected and again.pinned == back.pinned


def test_an_old_file_is_refused_as_the_old_reader_refused_it(tmp_path):
    doc = {"format": "attention-explorer-session", "version": 1, "run": {"options": {"--heads": "two"}},
           "view": {}, "edits": [], "pinned": None}  # fmt: skip
    with pytest.raises(InputError, match="argument --heads: invalid int value"):
        load_session(_old_file(tmp_path / "old.zip", doc))


def test_a_pinned_edit_outside_the_pinned_run_is_refused(tmp_path):
    pinned = RunSpec(sentence="a", edits=(Edit("q", (0, 3, 0), 1.0),))
    path = save_session(tmp_path / "s.zip", Session(RunSpec(sentence="a b c d e"), pinned=pinned))
    with pytest.raises(InputError, match="outside its shape"):
        load_session(path)


def test_arrays_in_memory_make_the_same_request_as_their_files(tmp_path):
    rng = np.random.default_rng(4)
    x, mask = rng.standard_normal((4, 6)), np.tril(np.ones((4, 4), bool), -1)
    w = {k: rng.standard_normal((3, 6, 2)) for k in ("W_q", "W_k", "W_v")}
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "m.npy", mask)
    np.savez(tmp_path / "w.npz", **w)
    files = spec_from_args(build_parser().parse_args(
        ["--embeddings", str(tmp_path / "x.npy"), "--mask", "custom", "--mask-file", str(tmp_path / "m.npy"),
         "--weights", str(tmp_path / "w.npz"), "--heads", "3", "--d-model", "6", "--out", "o"]))  # fmt: skip
    args = build_parser().parse_args(["--heads", "3", "--d-model", "6", "--mask", "custom", "--out", "o"])
    memory = spec_from_args(args, {"embeddings": x, "mask": mask, **{f"weights/{k}": a for k, a in w.items()}})
    assert files == memory  # by value: where the arrays came from does not count
    a, b = materialize(run(toy_request(files))), materialize(run(toy_request(memory)))
    for name in a.names:
        np.testing.assert_array_equal(a[name].array, b[name].array, err_msg=name)
    bad = memory.replace(arrays=HeldArrays({**memory.arrays, "weights/W_q": w["W_q"][:, :5]}))
    with pytest.raises(InputError, match=r"^the weights: W_q has shape \(3, 5, 2\)"):
        bad.validate()
    with pytest.raises(InputError, match=r"^weights file .*w.npz: W_q has shape \(3, 5, 2\)"):
        toy_request(files.replace(arrays=bad.arrays))  # a file's arrays are named by their file
