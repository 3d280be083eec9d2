"""Session files: round trip, export --session equals export, every bad file refused in one line."""

from __future__ import annotations

import json
import os
import stat
import zipfile

import numpy as np
import pytest

from main import main
from models.cli.export import build_parser
from models.config import InputError
from models.engine.edits import Edit, hide_key
from models.engine.held_arrays import HeldArrays
from models.engine.pipeline import materialize, run
from models.files.export import read_trace_files
from models.files.run_files import spec_from_args
from models.files.session import Session, load_session, save_session
from models.run_engine import toy_request
from models.runspec import RunSpec

SENTENCE = "the cat sat on the mat"


def _files(tmp_path):
    rng = np.random.default_rng(0)
    emb = tmp_path / "x.npy"
    np.save(emb, rng.standard_normal((5, 8)).astype(np.float32))
    mask = tmp_path / "m.npy"
    np.save(mask, np.triu(np.ones((5, 5), bool), 1) | (np.arange(5) == 2))
    weights = tmp_path / "w.npz"
    np.savez(weights, W_q=rng.standard_normal((2, 8, 4)), W_k=rng.standard_normal((2, 8, 4)),
             W_v=rng.standard_normal((2, 8, 3)), b_q=rng.standard_normal((2, 4)))  # fmt: skip
    return ["--embeddings", str(emb), "--labels", "a,b,c,d,e", "--mask", "custom", "--mask-file", str(mask),
            "--weights", str(weights), "--heads", "2", "--d-model", "8", "--d-v", "3", "--temperature", "0.7",
            "--pe", "sinusoidal", "--seed", "5"]  # fmt: skip


def _args(argv):
    return build_parser().parse_args([*argv, "--out", "unused"])


def _same_trace(a, b):
    assert a.names == b.names and a.query_tokens == b.query_tokens
    for name in a.names:
        np.testing.assert_array_equal(a[name].array, b[name].array, err_msg=name)


def test_save_then_load_gives_the_same_request_view_and_bit_identical_arrays(tmp_path):
    argv = _files(tmp_path)
    run_ = spec_from_args(_args(argv)).with_edits((Edit("q", (1, 2, 0), 2.5), hide_key(4, 0)))
    session = Session(run_, stage="masked", head=1, query=3, pinned=RunSpec(sentence=SENTENCE, heads=4, mask="causal"))
    path = save_session(tmp_path / "s.zip", session)
    back = load_session(path)
    assert (back.stage, back.head, back.query, back.run.edits) == ("masked", 1, 3, run_.edits)
    assert back.run == run_ and back.run.to_json() == run_.to_json()  # options, edits and arrays, by value
    for key, array in run_.arrays.items():
        assert back.run.arrays[key].dtype == array.dtype
        np.testing.assert_array_equal(back.run.arrays[key], array)
    assert back.pinned.heads == 4
    cli = toy_request(spec_from_args(_args(argv)))
    _same_trace(materialize(run(toy_request(back.run))), materialize(run(cli)))
    edited = materialize(back.trace())
    assert edited["q"].array[1, 2, 0] == np.float32(2.5) and (edited["weights"].array[:, 4, 0] == 0).all()
    with zipfile.ZipFile(path) as zf:  # readable without this tool
        doc = json.loads(zf.read("session.json"))
        assert doc["format"] == "attention-explorer-session" and doc["version"] == 3
        assert doc["run"]["options"]["labels"] == list("abcde") and doc["run"]["options"]["d_v"] == 3
        np.load(zf.open(doc["run"]["arrays"]["mask"]), allow_pickle=False)
        np.load(zf.open(doc["run"]["arrays"]["mask"]), allow_pickle=False)


def test_saving_is_atomic_follows_the_umask_and_replaces_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "s.zip"
    save_session(path, Session(RunSpec(sentence="a b")))
    old = os.umask(0o027)
    try:
        save_session(path, Session(RunSpec(sentence=SENTENCE)))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert load_session(path).run == RunSpec(sentence=SENTENCE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zip"]  # no temporary file left

    class Boom(Exception):
        pass

    real = zipfile.ZipFile.writestr
    calls = []

    def interrupted(self, name, data, *a, **k):  # the second member: half the file is written
        calls.append(name)
        if len(calls) == 2:
            raise Boom
        return real(self, name, data, *a, **k)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", interrupted)
    big = RunSpec(sentence="x", arrays=HeldArrays({"embeddings": np.zeros((3, 16), np.float32)}))
    with pytest.raises(Boom):
        save_session(path, Session(big))
    assert load_session(path).run == RunSpec(sentence=SENTENCE)  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zip"]


def test_export_session_writes_the_same_files_as_export_with_the_same_arguments(tmp_path, capsys):
    argv = _files(tmp_path)
    session = save_session(tmp_path / "s.zip", Session(spec_from_args(_args(argv))))
    assert main(["export", *argv, "--out", str(tmp_path / "a")]) == 0
    assert main(["export", "--session", str(session), "--out", str(tmp_path / "b")]) == 0
    man_a, arrays_a = read_trace_files(tmp_path / "a")
    man_b, arrays_b = read_trace_files(tmp_path / "b")
    assert man_a["stages"] == man_b["stages"] and man_a["config"] == man_b["config"]
    assert arrays_a.keys() == arrays_b.keys()
    for name in arrays_a:
        np.testing.assert_array_equal(arrays_a[name], arrays_b[name], err_msg=name)


def test_export_session_applies_the_edits(tmp_path):
    edits = (Edit("k", (0, 1, 1), 3.0),)
    session = save_session(tmp_path / "s.zip", Session(RunSpec(sentence=SENTENCE, edits=edits)))
    assert main(["export", "--session", str(session), "--out", str(tmp_path / "b")]) == 0
    _, arrays = read_trace_files(tmp_path / "b")
    assert arrays["k"][0, 1, 1] == 3.0


def test_export_session_refuses_input_options_beside_it(tmp_path, capsys):
    session = save_session(tmp_path / "s.zip", Session(RunSpec(sentence=SENTENCE)))
    assert main(["export", "--session", str(session), "--heads", "4", "--out", str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err.strip() == "error: --session holds the inputs; remove --heads"
    assert not (tmp_path / "b").exists()


def _rewrite(path, change, raw: bytes | None = None):
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(members["session.json"])
    change(doc, members)
    members["session.json"] = json.dumps(doc).encode() if raw is None else raw
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)


@pytest.mark.parametrize(
    "damage, words",
    [
        ("newer", "written by a newer version (format 4); this one reads format 3"),
        ("truncated", "corrupt or truncated"),
        ("garbage", "corrupt or truncated"),
        ("no-json", "no session.json inside"),
        ("missing-member", "member run/mask.npy is missing"),
        ("pickle", "not a readable .npy"),
        ("mask-shape", "custom mask has shape (5, 4), expected (5, 5)"),
        ("embeddings-shape", "embeddings has 7 columns but d_model is 8"),
        ("no-model", "no model 'surely-not-a-model'"),
        ("model-and-heads", "--heads does not apply with --model"),
        ("bad-option", "unknown option 'nonsense' in run"),
        ("bad-value", "option heads must be an integer, got 'two'"),
        ("edit-outside", "outside its shape"),
        ("not-json", "not valid JSON"),
        ("missing", "file not found"),
    ],
)
def test_every_bad_session_is_refused_with_one_line(tmp_path, damage, words):
    argv = _files(tmp_path)
    path = save_session(tmp_path / "s.zip", Session(spec_from_args(_args(argv))))
    rng = np.random.default_rng(1)
    if damage == "newer":
        _rewrite(path, lambda d, m: d.update(version=4))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a zip at all")
    elif damage == "no-json":
        with zipfile.ZipFile(path) as zf:
            members = {n: zf.read(n) for n in zf.namelist() if n != "session.json"}
        with zipfile.ZipFile(path, "w") as zf:
            for n, d in members.items():
                zf.writestr(n, d)
    elif damage == "missing-member":
        _rewrite(path, lambda d, m: m.pop("run/mask.npy"))
    elif damage == "pickle":
        import io
        import pickle

        _rewrite(path, lambda d, m: m.update({"run/mask.npy": _pickled(io, pickle)}))
    elif damage == "mask-shape":
        _rewrite(path, lambda d, m: m.update({"run/mask.npy": _npy(np.zeros((5, 4), bool))}))
    elif damage == "embeddings-shape":
        _rewrite(path, lambda d, m: m.update({"run/embeddings.npy": _npy(rng.standard_normal((5, 7)))}))
    elif damage == "no-model":
        path = save_session(path, Session(RunSpec(sentence="a", model="surely-not-a-model")))
    elif damage == "model-and-heads":
        path = save_session(path, Session(RunSpec(sentence="a", model="minilm", heads=4)))
    elif damage == "bad-option":
        _rewrite(path, lambda d, m: d["run"]["options"].update({"nonsense": 1}))
    elif damage == "bad-value":
        _rewrite(path, lambda d, m: d["run"]["options"].update({"heads": "two"}))
    elif damage == "edit-outside":
        _rewrite(path, lambda d, m: d["run"].update(edits=[{"stage": "q", "cell": [2, 0, 0], "value": 1.0}]))
    elif damage == "not-json":
        _rewrite(path, lambda d, m: None, raw=b"{nope")
    elif damage == "missing":
        path = tmp_path / "absent.zip"
    with pytest.raises(InputError) as info:
        load_session(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"session {path}: ")
    assert words in message
    assert main(["export", "--session", str(path), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def _npy(array):
    import io

    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _pickled(io, pickle):
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return buf.getvalue()
