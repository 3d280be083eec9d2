"""One safe reader for every file (issue 19, models/io): special files refused at once, sizes
and shapes checked from headers before data, zip members checked, JSON bounded; one line each."""

from __future__ import annotations

import json
import os
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npformat
from zip_craft import forge_encrypted, forge_method, honest_big_npy_member, npy_bytes, write_zip

import models.memory as memory
from models.cli.export import export_main
from models.config import InputError
from models.engine.held_arrays import HeldArrays
from models.engine.weights import load_weights
from models.files.attention_file import open_attention
from models.files.session import Session, load_session, save_session
from models.io import load_array, parse_json, read_array, read_json, read_npy, read_npz
from models.runspec import RunSpec


def _one_line(capsys, argv) -> str:
    rc = export_main(argv)
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def _in_thread(fn, timeout=10.0):
    """Run ``fn``; fail (not hang the suite) when it does not return within ``timeout`` s."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "the reader hung on a special file"
    return result


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.npy"
    os.mkfifo(path)
    return path


# --- special files: refused at once, never waited on ------------------------------------------------


@pytest.mark.parametrize("option", ["--embeddings", "--weights", "--session"])
def test_a_fifo_given_as_an_input_file_is_refused_at_once(tmp_path, capsys, fifo, option):
    argv = [option, str(fifo), "--out", str(tmp_path / "out")]
    if option != "--session":
        argv += ["--sentence", "a b"] if option == "--weights" else []
    result = _in_thread(lambda: export_main(argv))
    assert result.get("value") == 2, result
    err = capsys.readouterr().err
    assert "FIFO" in err and len(err.splitlines()) == 1


def test_a_fifo_or_a_device_as_an_attention_file_is_refused_at_once(fifo):
    for path in (fifo, Path("/dev/zero")):
        result = _in_thread(lambda p=path: open_attention(p))
        assert isinstance(result.get("error"), InputError), result
        assert "not a regular file" in str(result["error"])


def test_a_fifo_as_a_model_config_is_refused(tmp_path):
    from models.pretrained.registry import read_config

    os.mkfifo(tmp_path / "config.json")
    result = _in_thread(lambda: read_config(tmp_path))
    assert isinstance(result.get("error"), InputError) and "not a regular file" in str(result["error"])


# --- headers checked before data --------------------------------------------------------------------


def test_a_header_claiming_ten_billion_floats_is_refused_from_the_header(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.npy"
    with open(path, "wb") as f:
        npformat.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (100_000, 100_000)})
        f.write(bytes(64))
    line = _one_line(capsys, ["--embeddings", str(path), "--max-tokens", "16384", "--out", str(tmp_path / "o")])
    assert "more than the limit of 16384 tokens" in line  # issue 36: an embeddings file's shape first
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 30)
    line = _one_line(capsys, ["--embeddings", str(path), "--max-tokens", "100000", "--out", str(tmp_path / "o")])
    assert "has 100000 columns but d_model is 16" in line  # issue 50: its width against the run's, from the header
    line = _one_line(capsys, ["--embeddings", str(path), "--max-tokens", "100000", "--d-model", "100000",
                              "--out", str(tmp_path / "o")])  # fmt: skip
    assert "of memory but only" in line  # then the memory the run would hold for it
    with open(path, "rb") as f:
        with pytest.raises(InputError, match="truncated or its header is wrong.*40,000,000,000 bytes"):
            read_array(f, "big.npy", path.stat().st_size)
    result = _in_thread(lambda: open_attention(path))
    assert isinstance(result.get("error"), InputError)


def test_an_array_larger_than_the_memory_budget_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "a.npy"
    np.save(path, np.zeros((1024, 1024), np.float32))  # 4 MiB
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 20)
    with pytest.raises(InputError, match="needs about 4.0 MiB of memory"):
        read_npy(path, "embeddings file")


def test_an_npz_named_npy_is_read_as_what_it_is(tmp_path):
    path = tmp_path / "attention.npy"
    np.savez(path.with_suffix(""), attention=np.full((1, 2, 2), 0.5))
    (tmp_path / "attention.npz").rename(path)
    opened = open_attention(path)
    assert opened.weights.shape == (1, 1, 2, 2)


def test_a_pickled_array_is_never_unpickled(tmp_path):
    path = tmp_path / "o.npy"
    np.save(path, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="Python objects"):
        load_array(path, "embeddings file")


# --- zip archives: members checked before they are decompressed -----------------------------------


def test_an_honest_huge_session_member_is_refused_from_its_headers(tmp_path, monkeypatch):
    """A few MB on disk holding 256 MiB of weights: refused from the zip and .npy headers, before
    anything is decompressed (it used to be read whole, twice, then refused: 4.4 GB for 2 GiB)."""
    path = honest_big_npy_member(tmp_path / "s.zip", "run/weights/W_q.npy", (64, 1024, 1024))
    doc = {"format": "attention-explorer-session", "version": 1,
           "run": {"options": {"--sentence": "a b"}, "arrays": {"weights/W_q": "run/weights/W_q.npy"}}}
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("session.json", json.dumps(doc))
    monkeypatch.setattr(memory, "available_bytes", lambda: 64 << 20)
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, name, *a, **k: opened.append(name) or
                        real_open(self, name, *a, **k))  # fmt: skip
    with pytest.raises(InputError, match=r"needs about 256.0 MiB of memory"):
        load_session(path)
    assert all(getattr(n, "filename", n) == "session.json" for n in opened), opened


def test_a_session_matrix_with_more_rows_than_tokens_is_refused_from_its_header(tmp_path):
    path = honest_big_npy_member(tmp_path / "s.zip", "run/embeddings.npy", (140000, 4))  # the limit: 131,072
    doc = {"format": "attention-explorer-session", "version": 1,
           "run": {"options": {}, "arrays": {"embeddings": "run/embeddings.npy"}}}
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("session.json", json.dumps(doc))
    with pytest.raises(InputError, match="more than the limit of 131072 tokens"):
        load_session(path)


def _session_members(tmp_path) -> list[tuple[str, bytes]]:
    spec = RunSpec(sentence="a b c", arrays=HeldArrays({"mask": np.zeros((3, 3), bool)}))
    path = save_session(tmp_path / "good.zip", Session(spec))
    with zipfile.ZipFile(path) as zf:
        return [(n, zf.read(n)) for n in zf.namelist()]


def test_encrypted_members_are_refused(tmp_path):
    path = forge_encrypted(write_zip(tmp_path / "s.zip", _session_members(tmp_path)))
    with pytest.raises(InputError, match="encrypted"):
        load_session(path)


@pytest.mark.parametrize("method", [9, 12, 14, 99])  # deflate64, bzip2, lzma, AES
def test_compression_methods_not_read_here_are_one_line(tmp_path, method):
    path = forge_method(write_zip(tmp_path / "s.zip", _session_members(tmp_path)), method)
    with pytest.raises(InputError, match=f"compression method {method}"):
        load_session(path)


def test_clashing_member_names_are_refused(tmp_path):
    members = _session_members(tmp_path)
    path = write_zip(tmp_path / "s.zip", members + [members[0]])
    with pytest.raises(InputError, match="two members named"):
        load_session(path)
    npz = write_zip(tmp_path / "w.npz", [("W_q.npy", npy_bytes(np.ones((1, 2, 2)))), ("W_q", npy_bytes(np.ones(2)))])
    with pytest.raises(InputError, match="two arrays named 'W_q'"):
        read_npz(npz, "weights file")


def test_huge_edit_values_in_a_session_are_one_line(tmp_path):
    members = dict(_session_members(tmp_path))
    doc = json.loads(members["session.json"])
    doc["edits"] = [{"stage": "q", "cell": [0, 0, 0], "value": 1e400}]
    members["session.json"] = json.dumps(doc).replace("Infinity", "1e400").encode()
    path = write_zip(tmp_path / "s.zip", list(members.items()))
    with pytest.raises(InputError) as info:
        load_session(path)
    assert "\n" not in str(info.value)


# --- JSON: depth, number length, NaN, types -------------------------------------------------------


@pytest.mark.parametrize(
    "text, words",
    [("[" * 5000 + "]" * 5000, "nested too deeply"), ('{"a": 1' + "0" * 5000 + "}", "5,001 digits"),
     ('{"a": NaN}', "NaN"), ('{"a": 1e999}', "beyond the range"), ("[1, 2]", "not a JSON object"),
     (b"\xff{}", "not UTF-8"), ("{", "not valid JSON")],
)  # fmt: skip
def test_json_is_bounded_and_typed(text, words):
    with pytest.raises(InputError, match=words):
        parse_json(text, "x.json")


def test_a_json_file_that_is_too_large_is_refused_before_reading(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{}" + " " * 2000)
    with pytest.raises(InputError, match="too large"):
        read_json(path, "config", limit=1000)


# --- attention files and folders ------------------------------------------------------------------


def _folder(tmp_path, manifest) -> Path:
    folder = tmp_path / "survey"
    folder.mkdir()
    np.save(folder / "attention.npy", np.full((1, 1, 2, 2), 0.5, np.float32))
    (folder / "manifest.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    return folder


@pytest.mark.parametrize(
    "manifest, words",
    [("[1, 2]", "not a JSON object"), ("{", "not valid JSON"), ({"tokens": [["a"], ["b", "c"]]}, "list of strings"),
     ({"tokens": "ab"}, "list of strings"), ({"decoder": "false"}, "decoder must be true or false")],
)  # fmt: skip
def test_malformed_manifests_are_one_line(tmp_path, manifest, words):
    with pytest.raises(InputError, match=words):
        open_attention(_folder(tmp_path, manifest))


def test_a_weights_npy_is_not_a_weights_archive(tmp_path):
    from models.config import AttentionConfig

    np.save(tmp_path / "w.npy", np.ones(3))
    with pytest.raises(InputError, match="not a .npz archive"):
        load_weights(tmp_path / "w.npy", AttentionConfig())


# --- config values checked before anything is built for them --------------------------------------


@pytest.mark.parametrize(
    "change, words",
    [({"num_hidden_layers": 100_000_000}, "num_hidden_layers 100000000 is beyond what any model has"),
     ({"hidden_size": 10**30}, "hidden_size 1000000000000000000000000000000 is beyond"),
     ({"layer_norm_eps": 10**400}, "config.json: it holds a number with 401 digits")],
)  # fmt: skip
def test_config_values_python_cannot_hold_are_one_line_before_any_allocation(tmp_path, capsys, change, words):
    from models.pretrained import resolve_model

    source = resolve_model("minilm")
    folder = tmp_path / "model"
    folder.mkdir()
    for path in source.iterdir():
        if path.name != "config.json":
            (folder / path.name).symlink_to(path.resolve())
    config = json.loads((source / "config.json").read_text()) | change
    (folder / "config.json").write_text(json.dumps(config))
    line = _one_line(capsys, ["--model", str(folder), "--sentence", "a b", "--out", str(tmp_path / "o")])
    assert words in line


def test_a_session_weight_of_the_wrong_shape_is_refused_from_its_header(tmp_path):
    """Even with memory to spare: the run's sizes give each weight's shape, checked before the
    data is decompressed (a 2 GiB member of a 2 MB file was read, twice, then refused)."""
    path = honest_big_npy_member(tmp_path / "s.zip", "run/weights/W_q.npy", (64, 1024, 1024))
    doc = {"format": "attention-explorer-session", "version": 1,
           "run": {"options": {"--sentence": "a b", "--heads": 2, "--d-model": 8},
                   "arrays": {"weights/W_q": "run/weights/W_q.npy"}}}  # fmt: skip
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("session.json", json.dumps(doc))
    with pytest.raises(InputError, match=r"has shape \(64, 1024, 1024\), expected \(2, 8, 4\)"):
        load_session(path)
