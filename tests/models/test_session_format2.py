"""Session format 2 (a pinned run's own edits and difference), written only when needed; format 1
files (the view without "difference", no pinned edits) still open; arrays given in memory make the
same request as their files."""

from __future__ import annotations

import json
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest

from models.cli import build_parser, request_from_args
from models.config import InputError
from models.edits import Edit
from models.pipeline import materialize, run
from models.session import Run, Session, load_session, save_session


def _doc(path):
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read("session.json"))


def test_pinned_edits_and_difference_round_trip_as_format_2(tmp_path):
    session = Session(Run({"--sentence": "a b c"}), difference=True, pinned=Run({"--sentence": "a b c d"}),
                      pinned_edits=(Edit("k", (1, 2, 0), -1.5),), pinned_difference=True)  # fmt: skip
    path = save_session(tmp_path / "s.zip", session)
    doc = _doc(path)
    assert doc["version"] == 2 and doc["pinned"]["edits"] == [{"stage": "k", "cell": [1, 2, 0], "value": -1.5}]
    back = load_session(path)
    assert back.pinned_edits == session.pinned_edits and back.pinned_difference and back.difference


def test_without_pinned_edits_the_file_stays_format_1(tmp_path):
    path = save_session(tmp_path / "s.zip", Session(Run({"--sentence": "a b"}), difference=True,
                                                    pinned=Run({"--sentence": "a"})))  # fmt: skip
    assert _doc(path)["version"] == 1 and "edits" not in _doc(path)["pinned"]


def test_a_format_1_file_of_the_earlier_writer_opens(tmp_path):
    path = tmp_path / "old.zip"
    doc = {"format": "attention-explorer-session", "version": 1, "run": {"options": {"--sentence": "a b"},
           "arrays": {}}, "view": {"stage": "q", "head": 0, "query": 1}, "edits": [], "pinned": None}  # fmt: skip
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("session.json", json.dumps(doc))
    back = load_session(path)
    assert (back.stage, back.head, back.query, back.difference, back.pinned_edits) == ("q", 0, 1, False, ())


def test_a_pinned_edit_outside_the_pinned_run_is_refused(tmp_path):
    path = save_session(tmp_path / "s.zip", Session(Run({"--sentence": "a b c d e"}), pinned=Run({"--sentence": "a"}),
                                                    pinned_edits=(Edit("q", (0, 3, 0), 1.0),)))  # fmt: skip
    with pytest.raises(InputError, match="outside its shape"):
        load_session(path)


def test_arrays_in_memory_make_the_same_request_as_their_files(tmp_path):
    rng = np.random.default_rng(4)
    x, mask = rng.standard_normal((4, 6)), np.tril(np.ones((4, 4), bool), -1)
    w = {k: rng.standard_normal((3, 6, 2)) for k in ("W_q", "W_k", "W_v")}
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "m.npy", mask)
    np.savez(tmp_path / "w.npz", **w)
    files = request_from_args(build_parser().parse_args(
        ["--embeddings", str(tmp_path / "x.npy"), "--mask", "custom", "--mask-file", str(tmp_path / "m.npy"),
         "--weights", str(tmp_path / "w.npz"), "--heads", "3", "--d-model", "6", "--out", "o"]))  # fmt: skip
    args = build_parser().parse_args(["--heads", "3", "--d-model", "6", "--mask", "custom", "--out", "o"])
    memory = request_from_args(SimpleNamespace(**{**vars(args), "embeddings": x, "mask_file": mask, "weights": w}))
    a, b = materialize(run(files)), materialize(run(memory))
    for name in a.names:
        np.testing.assert_array_equal(a[name].array, b[name].array, err_msg=name)
    w["W_q"] = w["W_q"][:, :5]
    bad = SimpleNamespace(**{**vars(args), "embeddings": x, "mask_file": mask, "weights": w})
    with pytest.raises(InputError, match=r"^the session's weights: W_q has shape \(3, 5, 2\)"):
        request_from_args(bad)
