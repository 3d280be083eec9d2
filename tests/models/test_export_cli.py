"""Export folders and the headless ``export`` command: round trips, refusals, atomicity, device."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_refs import make_mha, mha_to_weights, run_mha
from export_refs import assert_refused as _assert_refused
from export_refs import leftovers as _leftovers
from export_refs import save_that_fails_on_call as _save_that_fails_on_call

import models.engine.device as device_mod
from models.cli.export import export_main
from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine.pipeline import run
from models.engine.weights import save_weights
from models.files.export import MANIFEST, read_trace_files, write_array, write_trace

ROOT = Path(__file__).resolve().parents[2]


def _trace(**config):
    cfg = AttentionConfig(**({"heads": 2, "d_model": 8, "mask": "causal", "pe": "sinusoidal"} | config))
    return run(AttentionRequest(config=cfg, sentence="the cat sat on the mat", cross_sentence="a dog"))


def _strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


# --- the exported folder ---------------------------------------------------------------------------


def test_export_writes_every_stage_in_order_and_the_manifest_describes_it(tmp_path):
    trace = _trace()
    out = write_trace(trace, tmp_path / "run")
    man = _strict_json((out / MANIFEST).read_text(encoding="utf-8"))
    assert [s["name"] for s in man["stages"]] == list(trace.names)
    assert [s["file"] for s in man["stages"]] == [f"{n}.npy" for n in trace.names]
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST] + [f"{n}.npy" for n in trace.names])
    for entry, stage in zip(man["stages"], trace.stages):
        array = np.load(out / entry["file"], allow_pickle=False)
        assert array.shape == tuple(entry["shape"]) == stage.shape
        assert str(array.dtype) == entry["dtype"] == "float32"
        assert len(entry["axes"]) == array.ndim
        np.testing.assert_array_equal(array, stage.array)
    assert man["query_tokens"] == ["a", "dog"]
    assert man["key_tokens"] == ["the", "cat", "sat", "on", "the", "mat"]
    assert man["config"]["heads"] == 2 and man["config"]["mask"] == "causal" and man["config"]["cross"] is True
    assert man["device"] == "cpu"
    assert man["torch_version"] == torch.__version__
    assert man["format"] == "attention-explorer-trace/1"
    assert _leftovers(tmp_path) == []


def test_read_trace_files_gives_back_the_manifest_and_arrays(tmp_path):
    trace = _trace(mask="none", pe="none")
    write_trace(trace, tmp_path / "run")
    man, arrays = read_trace_files(tmp_path / "run")
    assert list(arrays) == list(trace.names)
    for name in trace.names:
        np.testing.assert_array_equal(arrays[name], trace[name].array)


def test_export_into_an_existing_empty_folder_is_allowed(tmp_path):
    (tmp_path / "run").mkdir()
    write_trace(_trace(), tmp_path / "run")
    assert (tmp_path / "run" / MANIFEST).is_file()


def test_export_refuses_a_non_empty_folder_and_force_replaces_only_a_previous_export(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "old.txt").write_text("keep me")
    with pytest.raises(InputError, match="not empty"):
        write_trace(_trace(), out)
    with pytest.raises(InputError, match="not a previous export"):
        write_trace(_trace(), out, force=True)
    assert (out / "old.txt").read_text() == "keep me"
    previous = tmp_path / "previous"
    write_trace(_trace(mask="none"), previous)
    write_trace(_trace(), previous, force=True)
    assert read_trace_files(previous)[0]["config"]["mask"] == "causal"
    assert _leftovers(tmp_path) == []


class _Boom(RuntimeError):
    pass


def test_an_interrupted_export_leaves_nothing_behind(tmp_path, monkeypatch):
    _save_that_fails_on_call(monkeypatch, 4, _Boom("interrupted"))
    with pytest.raises(_Boom):
        write_trace(_trace(), tmp_path / "run")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_forced_export_keeps_the_previous_folder(tmp_path, monkeypatch):
    out = tmp_path / "run"
    write_trace(_trace(mask="none"), out)
    before = sorted(p.name for p in out.iterdir())
    _save_that_fails_on_call(monkeypatch, 2, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        write_trace(_trace(), out, force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    assert sorted(p.name for p in out.iterdir()) == before
    assert read_trace_files(out)[0]["config"]["mask"] == "none"


def test_a_failing_temporary_folder_is_an_input_error(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    with pytest.raises(InputError, match="cannot write to .*Permission denied"):
        write_trace(_trace(), tmp_path / "run")
    assert list(tmp_path.iterdir()) == []


def test_write_array_saves_one_matrix_atomically_and_adds_the_suffix(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = write_array(a, tmp_path / "weights")
    assert path == tmp_path / "weights.npy"
    np.testing.assert_array_equal(np.load(path, allow_pickle=False), a)
    write_array(a * 2, path)  # replaces
    np.testing.assert_array_equal(np.load(path, allow_pickle=False), a * 2)
    assert [p.name for p in tmp_path.iterdir()] == ["weights.npy"]


# --- the export command: success -------------------------------------------------------------------


def test_cli_export_writes_a_trace_and_reports_it(tmp_path, capsys):
    out = tmp_path / "run"
    rc = export_main(["--sentence", "the cat sat", "--heads", "2", "--d-model", "8", "--mask", "causal",
                      "--out", str(out)])  # fmt: skip
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert captured.err == ""
    assert captured.out.startswith(f"wrote 14 stages to {out} (cpu,")
    man, arrays = read_trace_files(out)
    assert man["key_tokens"] == ["the", "cat", "sat"] and man["device"] == "cpu"
    assert np.all(arrays["weights"][:, 0, 1:] == 0.0)


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_cli_weights_file_reproduces_nn_multihead_attention(tmp_path, capsys, heads, cross):
    d_model = 16
    mha = make_mha(d_model, heads, seed=heads + 100)
    save_weights(tmp_path / "w.npz", mha_to_weights(mha))
    rng = np.random.default_rng(heads)
    x_k = rng.standard_normal((5, d_model)).astype(np.float32)
    x_q = rng.standard_normal((3, d_model)).astype(np.float32) if cross else x_k
    np.save(tmp_path / "x.npy", x_k)
    np.save(tmp_path / "xq.npy", x_q)
    argv = ["--embeddings", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "w.npz"), "--heads", str(heads),
            "--d-model", str(d_model), "--mask", "causal", "--out", str(tmp_path / "run")]  # fmt: skip
    if cross:
        argv += ["--cross-embeddings", str(tmp_path / "xq.npy")]
    assert export_main(argv) == 0, capsys.readouterr().err
    _, arrays = read_trace_files(tmp_path / "run")
    out, weights = run_mha(mha, x_q, x_k, causal=True, average=True)
    np.testing.assert_allclose(arrays["output"], out, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(arrays["weights"].mean(axis=0), weights, atol=1e-5, rtol=1e-5)


def test_cli_force_replaces_a_previous_export(tmp_path, capsys):
    out = tmp_path / "run"
    assert export_main(["--sentence", "a b c", "--pe", "sinusoidal", "--out", str(out)]) == 0
    assert (out / "positional_encoding.npy").is_file()
    assert export_main(["--sentence", "a b", "--out", str(out), "--force"]) == 0
    assert not (out / "positional_encoding.npy").exists() and (out / MANIFEST).is_file()
    assert read_trace_files(out)[0]["key_tokens"] == ["a", "b"]
    assert _leftovers(tmp_path) == []


def test_cli_custom_mask_file_and_labels(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.eye(3, 16, dtype=np.float32))
    np.save(tmp_path / "m.npy", np.array([[0, 1, 1], [1, 1, 1], [0, 0, 0]], dtype=bool))
    argv = ["--embeddings", str(tmp_path / "x.npy"), "--labels", "x, y,z", "--mask", "custom",
            "--mask-file", str(tmp_path / "m.npy"), "--out", str(tmp_path / "run")]  # fmt: skip
    assert export_main(argv) == 0, capsys.readouterr().err
    man, arrays = read_trace_files(tmp_path / "run")
    assert man["key_tokens"] == ["x", "y", "z"]
    assert np.all(arrays["weights"][:, 1] == 0.0) and np.all(arrays["head_output"][:, 1] == 0.0)
    np.testing.assert_allclose(arrays["weights"][:, 0], [[1.0, 0.0, 0.0]] * 2)


def test_cli_cuda_request_on_a_cpu_machine_falls_back_with_a_note(tmp_path, capsys, monkeypatch):
    device_mod.cuda_name.cache_clear()
    monkeypatch.setattr(device_mod, "cuda_name", lambda: None)
    assert export_main(["--sentence", "a b", "--device", "cuda", "--out", str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    assert captured.err == "note: CUDA was requested but is not available; used the CPU\n"
    man, _ = read_trace_files(tmp_path / "run")
    assert man["device"] == "cpu"
    assert man["meta"]["notices"] == ["CUDA was requested but is not available; used the CPU"]


# --- the export command: refusals --------------------------------------------------------------------


def _npy_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "good": np.zeros((3, 16), np.float32),
        "one_d": np.zeros(16, np.float32),
        "three_d": np.zeros((1, 3, 16), np.float32),
        "narrow": np.zeros((3, 5), np.float32),
        "text": np.array([["a"] * 16] * 2),
        "nan": np.full((2, 16), np.nan),
    }
    paths = {}
    for name, array in files.items():
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], array)
    paths["pickled"] = tmp_path / "pickled.npy"
    np.save(paths["pickled"], np.array([{"evil": 1}, None], dtype=object), allow_pickle=True)
    paths["garbage"] = tmp_path / "garbage.npy"
    paths["garbage"].write_bytes(b"\x00\x01 this is not numpy")
    paths["truncated"] = tmp_path / "truncated.npy"
    paths["truncated"].write_bytes(paths["good"].read_bytes()[:100])
    paths["archive"] = tmp_path / "archive.npz"
    np.savez(paths["archive"], x=np.zeros((3, 16)))
    return paths


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--sentence", ""], "the sentence is empty"),
        (["--sentence", "   "], "the sentence is empty"),
        (["--sentence", "a b c d e", "--max-tokens", "4"], "has 5 tokens, more than the limit of 4"),
        (["--sentence", "a b", "--d-model", "10", "--heads", "4"], "d_model=10 is not divisible by heads=4"),
        (["--sentence", "a b", "--temperature", "nan"], "temperature must be a positive number"),
        (["--sentence", "a b", "--mask", "padding", "--pad-positions", "0,7"], "pad position(s) [7] out of range"),
        (["--sentence", "a b", "--mask", "custom"], "--mask custom needs --mask-file"),
        (["--sentence", "a b", "--cross-sentence", "c", "--max-tokens", "1"], "more than the limit of 1"),
        ([], "give --sentence or --embeddings"),
    ],
)
def test_cli_refuses_bad_arguments_with_one_line_and_writes_nothing(tmp_path, capsys, argv, message):
    _assert_refused(capsys, argv, tmp_path / "run", message)


@pytest.mark.parametrize(
    "which,message",
    [
        ("missing", "embeddings file not found"),
        ("folder", "is a folder"),
        ("garbage", "cannot read embeddings file"),
        ("truncated", "cannot read embeddings file"),
        ("pickled", "cannot read embeddings file"),
        ("archive", "is a .npz archive"),
        ("one_d", "must be a 2-D matrix"),
        ("three_d", "must be a 2-D matrix"),
        ("narrow", "has 5 columns but d_model is 16"),
        ("text", "must hold real numbers"),
        ("nan", "contains NaN or infinite values"),
    ],
)
def test_cli_refuses_bad_embeddings_files(tmp_path, capsys, which, message):
    paths = _npy_files(tmp_path)
    paths["missing"] = tmp_path / "missing.npy"
    paths["folder"] = tmp_path
    _assert_refused(capsys, ["--embeddings", str(paths[which])], tmp_path / "run", message)


def test_cli_refuses_an_embeddings_file_it_cannot_open(tmp_path, capsys):
    locked = tmp_path / "locked.npy"
    np.save(locked, np.zeros((2, 16), np.float32))
    locked.chmod(0o000)
    try:
        if os.access(locked, os.R_OK):
            # Running as root: permissions are not enforced, so use a path under a regular file.
            source = locked / "x.npy"
        else:
            source = locked
        _assert_refused(capsys, ["--embeddings", str(source)], tmp_path / "run", "cannot read embeddings file")
    finally:
        locked.chmod(0o644)


def test_cli_refuses_bad_cross_embeddings_labels_and_mask_files(tmp_path, capsys):
    paths = _npy_files(tmp_path)
    out = tmp_path / "run"
    good = str(paths["good"])
    _assert_refused(capsys, ["--embeddings", good, "--cross-embeddings", str(paths["narrow"])], out,
                    "query embeddings has 5 columns")  # fmt: skip
    _assert_refused(capsys, ["--embeddings", good, "--labels", "a,b"], out, "2 labels given for 3 rows")
    _assert_refused(capsys, ["--embeddings", good, "--sentence", "a"], out, "not both")
    np.save(tmp_path / "mask_int.npy", np.zeros((3, 3), np.int64))
    np.save(tmp_path / "mask_shape.npy", np.zeros((3, 2), bool))
    custom = ["--embeddings", good, "--mask", "custom", "--mask-file"]
    _assert_refused(capsys, [*custom, str(tmp_path / "mask_int.npy")], out, "must hold booleans")
    _assert_refused(capsys, [*custom, str(tmp_path / "mask_shape.npy")], out, "custom mask has shape (3, 2)")
    # Regression: an .npz archive as the mask crashed with AttributeError (no .dtype).
    _assert_refused(capsys, [*custom, str(paths["archive"])], out, "is a .npz archive")


def test_cli_refuses_weights_files_that_do_not_fit(tmp_path, capsys):
    out = tmp_path / "run"
    np.savez(tmp_path / "shape.npz", W_q=np.zeros((2, 16, 8)), W_k=np.zeros((2, 16, 8)), W_v=np.zeros((2, 16, 7)))
    _assert_refused(capsys, ["--sentence", "a b", "--weights", str(tmp_path / "shape.npz")], out,
                    "W_v has shape (2, 16, 7), expected (2, 16, 8)")  # fmt: skip
    _assert_refused(capsys, ["--sentence", "a b", "--weights", str(tmp_path / "none.npz")], out,
                    "weights file not found")  # fmt: skip
    # Regression: a .npy file given as --weights crashed with TypeError (no context manager).
    np.save(tmp_path / "single.npy", np.zeros((2, 16, 8)))
    _assert_refused(capsys, ["--sentence", "a b", "--weights", str(tmp_path / "single.npy")], out,
                    "is not a .npz archive")  # fmt: skip
