"""Fuzzing every reader (issue 19): mutated sessions, attention files and folders, .npy/.npz
headers and config.json files end in a result or one :class:`InputError` line, never another
exception. Examples are bounded (``EXAMPLES`` per reader, no deadline) so the suite takes seconds;
docs/hardening.md gives the counts."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from models.config import InputError
from models.engine.held_arrays import HeldArrays
from models.files.attention_file import open_attention
from models.files.session import Session, load_session, save_session
from models.io import load_array, parse_json
from models.runspec import RunSpec

EXAMPLES = 150
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip


def ends_well(read, *args):
    """``read(*args)``: a result, or an InputError of one line; anything else fails the test."""
    try:
        result = read(*args)
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).strip(), repr(str(exc))
        event(f"{read.__name__}: refused")
        return None
    event(f"{read.__name__}: read")
    return result


# --- hostile values ---------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(["false", "1e999", ""]),
)  # fmt: skip
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                          max_size=4), max_leaves=8)


def _mutate_bytes(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for where, byte in edits:
        out[where % len(out)] = byte
    return bytes(out[: cut % len(out)] if cut is not None else out)


byte_edits = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=6)
cuts = st.none() | st.integers(0, 1 << 20)


# --- .npy and .npz headers ----------------------------------------------------------------------------

descrs = st.one_of(st.sampled_from(["<f4", "<f8", "|u1", ">f4", "|b1", "<i8", "<U3", "|S2", "|O", "V8", "<M8[s]",
                                    "<c8", "[('a', '<f4')]", "'<f4'", "", "<U0"]), st.text(max_size=8))
shapes = st.one_of(st.lists(st.integers(0, 4), max_size=4).map(tuple),
                   st.lists(st.integers(-3, 2**40), max_size=5).map(tuple), st.text(max_size=6))  # fmt: skip


def npy_bytes(descr, fortran, shape, body: bytes, version: int = 1) -> bytes:
    """A .npy file whose header says anything (not what numpy would write)."""
    descr_text = descr if descr.startswith("[") or descr.startswith("'") else repr(descr)
    header = f"{{'descr': {descr_text}, 'fortran_order': {fortran!r}, 'shape': {shape!r}, }}"
    header += " " * ((-(len(header) + 11)) % 64) + "\n"
    raw = header.encode("latin1", "replace")
    length = struct.pack("<H", len(raw)) if version == 1 else struct.pack("<I", len(raw))
    return b"\x93NUMPY" + bytes([version, 0]) + length + raw + body


def _fitting(descr, shape, body: bytes) -> bytes:
    """``body`` stretched to exactly the bytes the header asks for, when that is small: so that
    half the headers describe a readable array and the checks after the header run too."""
    try:
        count = int(np.prod(shape)) * np.dtype(descr).itemsize
    except (TypeError, ValueError, SyntaxError):
        return body
    if not 0 <= count <= 4096 or not body:
        return body
    return (body * (count // len(body) + 1))[:count]


@FUZZ
@given(descr=descrs, fortran=st.one_of(st.booleans(), st.integers(), st.text(max_size=3)), shape=shapes,
       body=st.binary(min_size=1, max_size=256), version=st.sampled_from([1, 1, 2, 3]))  # fmt: skip
def test_fuzz_npy_headers(tmp_path, descr, fortran, shape, body, version):
    path = tmp_path / "x.npy"
    path.write_bytes(npy_bytes(descr, fortran, shape, _fitting(descr, shape, body), version))
    loaded = ends_well(load_array, path, "embeddings file")
    if loaded is not None:
        assert isinstance(loaded, np.ndarray) and not loaded.dtype.hasobject
    ends_well(open_attention, path)


@pytest.mark.filterwarnings("ignore:Duplicate name")
@FUZZ
@given(members=st.lists(st.tuples(st.sampled_from(["attention", "tokens", "attention.npy", "w", "a/b", "x.npy", ""]),
                                  descrs, shapes, st.binary(min_size=1, max_size=64)), min_size=1, max_size=4),
       method=st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]), edits=byte_edits, cut=cuts)  # fmt: skip
def test_fuzz_npz_archives(tmp_path, members, method, edits, cut):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, descr, shape, body in members:
            zf.writestr(zipfile.ZipInfo(name or "x"), npy_bytes(descr, False, shape, _fitting(descr, shape, body)))
    path = tmp_path / "x.npz"
    path.write_bytes(_mutate_bytes(buf.getvalue(), edits, cut))
    ends_well(load_array, path, "weights file")
    ends_well(open_attention, path)


# --- attention files: real arrays, tokens and folders -----------------------------------------------


@FUZZ
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=5),
       dtype=st.sampled_from(["f4", "f8", "i2", "u1", "?", "c8", "U2"]),
       tokens=st.none() | st.lists(st.text(max_size=3), max_size=6), manifest=values)  # fmt: skip
def test_fuzz_attention_files_and_folders(tmp_path, shape, dtype, tokens, manifest):
    array = np.zeros(shape, dtype=dtype) if dtype != "U2" else np.full(shape, "a", dtype="U2")
    extra = {} if tokens is None else {"tokens": np.array(tokens, dtype=str)}
    np.savez(tmp_path / "a.npz", attention=array, **extra)
    ends_well(open_attention, tmp_path / "a.npz")
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    np.save(folder / "attention.npy", array)
    (folder / "manifest.json").write_text(json.dumps(manifest if not isinstance(manifest, dict) else
                                                     {**manifest, "tokens": tokens}))  # fmt: skip
    ends_well(open_attention, folder)


# --- sessions ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_session(tmp_path_factory) -> bytes:
    run = RunSpec(sentence="the cat sat", heads=2, d_model=8, mask="custom",
                  arrays=HeldArrays({"mask": np.eye(3, dtype=bool)}))  # fmt: skip
    path = save_session(tmp_path_factory.mktemp("s") / "s.zip", Session(run, "weights", 1, 2))
    return path.read_bytes()


@FUZZ
@given(edits=byte_edits, cut=cuts)
def test_fuzz_session_bytes(tmp_path, good_session, edits, cut):
    path = tmp_path / "s.zip"
    path.write_bytes(_mutate_bytes(good_session, edits, cut))
    ends_well(load_session, path)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


@FUZZ
@given(data=st.data())
def test_fuzz_session_documents(tmp_path, good_session, data):
    with zipfile.ZipFile(io.BytesIO(good_session)) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(members["session.json"])
    doc.setdefault("edits", [{"stage": "q", "cell": [0, 0, 0], "value": 1.0}])
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(list(_paths(doc))[1:]))
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        parent[where[-1]] = data.draw(values)
    members["session.json"] = json.dumps(doc).encode()
    path = tmp_path / "s.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, raw in members.items():
            zf.writestr(name, raw)
    ends_well(load_session, path)


# --- config.json ------------------------------------------------------------------------------------

CONFIG_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "layer_norm_eps",
               "hidden_act", "max_position_embeddings", "type_vocab_size", "vocab_size", "model_type",
               "pad_token_id", "rope_theta", "position_embedding_type"]  # fmt: skip


@pytest.fixture(scope="module")
def minilm_weights():
    from models.pretrained import resolve_model
    from models.pretrained.loader import open_weights, weight_files

    folder = resolve_model("minilm")
    files, weight_map = weight_files(folder)
    return folder, open_weights(files, weight_map, "bert", __import__("torch").device("cpu"))


def _build(folder: Path, weights):
    """read_config and the family's architecture, on the checkpoint's headers only (no data)."""
    from models.pretrained.loader import ARCHITECTURES
    from models.pretrained.registry import read_config

    cfg = read_config(folder)
    return ARCHITECTURES[cfg["model_type"]](cfg, weights.as_meta())


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), values, min_size=1, max_size=3),
       raw_edits=st.none() | byte_edits)  # fmt: skip
def test_fuzz_config_json(tmp_path, minilm_weights, changes, raw_edits):
    source, weights = minilm_weights
    cfg = json.loads((source / "config.json").read_text()) | changes
    text = json.dumps(cfg).encode()
    (tmp_path / "config.json").write_bytes(_mutate_bytes(text, raw_edits, None) if raw_edits else text)
    ends_well(_build, tmp_path, weights)


@FUZZ
@given(text=st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin1")))
def test_fuzz_json_text(text):
    ends_well(parse_json, text, "x.json", None)
