"""Exports never lose data: --force replaces only a previous export, replacing keeps the old or
the new folder whole whatever happens, and folders follow the user's umask (issue 12)."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import sys

import numpy as np
import pytest

import models.io.atomic as atomic
from models.cli.export import export_main
from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine.pipeline import run
from models.files.export import MANIFEST, read_trace_files, write_array, write_trace
from models.io.atomic import atomic_folder, is_previous_export


def _trace(sentence="the cat sat", **config):
    cfg = AttentionConfig(**({"heads": 2, "d_model": 8} | config))
    return run(AttentionRequest(config=cfg, sentence=sentence))


def _tree(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _leftovers(parent):
    return sorted(p.name for p in parent.iterdir() if ".partial-" in p.name or ".old-" in p.name)


@pytest.fixture
def user_folder(tmp_path):
    """A folder a user cares about: a git repository with a thesis."""
    folder = tmp_path / "thesis"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "thesis.tex").write_text("\\chapter{Attention}")
    return folder


# --- --force replaces only a previous export ------------------------------------------------------


def test_force_never_deletes_a_users_folder(user_folder, capsys):
    before = _tree(user_folder)
    rc = export_main(["--sentence", "a b", "--out", str(user_folder), "--force"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert "is not a previous export (it has no manifest.json)" in err
    assert _tree(user_folder) == before
    assert _leftovers(user_folder.parent) == []


def test_force_refuses_a_folder_with_a_foreign_manifest(tmp_path):
    out = tmp_path / "other"
    out.mkdir()
    (out / MANIFEST).write_text(json.dumps({"name": "some other tool", "stages": []}))
    with pytest.raises(InputError, match="was not written by this tool"):
        write_trace(_trace(), out, force=True)
    (out / MANIFEST).write_text("[[[[" * 100000)  # hostile: deeply nested, not even closed
    with pytest.raises(InputError, match="cannot be read"):
        write_trace(_trace(), out, force=True)
    assert [p.name for p in out.iterdir()] == [MANIFEST]


def test_force_refuses_a_previous_export_holding_the_users_files_too(tmp_path):
    out = tmp_path / "run"
    write_trace(_trace(), out)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"also holds files this tool did not write \(notes\.txt\)"):
        write_trace(_trace("a dog"), out, force=True)
    assert (out / "notes.txt").read_text() == "mine"
    assert read_trace_files(out)[0]["key_tokens"] == ["the", "cat", "sat"]


def test_manifests_carry_the_tool_marker_and_older_manifests_are_still_recognised(tmp_path):
    out = tmp_path / "run"
    write_trace(_trace(), out)
    man = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    assert man["tool"] == "attention-explorer"
    del man["tool"]  # as written before the marker existed
    (out / MANIFEST).write_text(json.dumps(man), encoding="utf-8")
    assert is_previous_export(out)
    write_trace(_trace("a dog"), out, force=True)
    assert read_trace_files(out)[0]["key_tokens"] == ["a", "dog"]


# --- replacing keeps the old export or the new one, whole -----------------------------------------


def _replace_that(monkeypatch, on_call: int, action):
    """os.replace that runs ``action()`` instead of (or after) its ``on_call``-th call."""
    real = os.replace
    calls = []

    def replace(src, dst):
        calls.append((src, dst))
        return action(real, src, dst) if len(calls) == on_call else real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    return calls


def _old_and_new(tmp_path):
    out = tmp_path / "run"
    write_trace(_trace("old words here"), out)
    return out, _tree(out)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_force_replaces_a_previous_export_whole(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    out, _ = _old_and_new(tmp_path)
    write_trace(_trace("new"), out, force=True)
    assert read_trace_files(out)[0]["key_tokens"] == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_an_interrupt_between_the_two_renames_keeps_the_old_export(tmp_path, monkeypatch):
    # Regression: the interrupt deleted both the old folder (moved aside) and the new one.
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    out, before = _old_and_new(tmp_path)

    def interrupted(real, src, dst):
        raise KeyboardInterrupt

    _replace_that(monkeypatch, 2, interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_trace(_trace("new"), out, force=True)
    assert _tree(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_during_the_renames_waits_until_the_new_export_is_in_place(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    out, _ = _old_and_new(tmp_path)

    def rename_then_signal(real, src, dst):
        real(src, dst)
        signal.raise_signal(signal.SIGINT)  # arrives right after the old folder moved aside

    _replace_that(monkeypatch, 1, rename_then_signal)
    with pytest.raises(KeyboardInterrupt):
        write_trace(_trace("new"), out, force=True)
    assert read_trace_files(out)[0]["key_tokens"] == ["new"]  # whole, and the old one is gone
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_a_folder_that_cannot_be_moved_aside_leaves_nothing_behind(tmp_path, monkeypatch):
    # Regression: an empty .run.old-* folder was left beside the target.
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    out, before = _old_and_new(tmp_path)

    def refused(real, src, dst):
        raise PermissionError(errno.EACCES, "Permission denied")

    _replace_that(monkeypatch, 1, refused)
    with pytest.raises(InputError, match="cannot write to .*Permission denied"):
        write_trace(_trace("new"), out, force=True)
    assert _tree(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_atomic_folder_publishes_only_a_finished_block(tmp_path):
    out = tmp_path / "stream"
    with pytest.raises(RuntimeError):
        with atomic_folder(out) as tmp:
            np.save(tmp / "a.npy", np.zeros(3))
            raise RuntimeError("stopped half way")
    assert list(tmp_path.iterdir()) == []
    with atomic_folder(out) as tmp:
        np.save(tmp / "a.npy", np.zeros(3))
        assert not out.exists()
    assert [p.name for p in out.iterdir()] == ["a.npy"]


# --- permissions follow the umask ------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_export_folders_and_files_follow_the_umask(tmp_path, mask):
    # Regression: folders were always 0700 (tempfile.mkdtemp), single matrices 0600 (mkstemp).
    old = os.umask(mask)
    try:
        out = write_trace(_trace(), tmp_path / "run")
        matrix = write_array(np.zeros((2, 2), np.float32), tmp_path / "m.npy")
        assert atomic.umask() == mask  # read without changing it
        assert os.umask(mask) == mask
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~mask
    assert stat.S_IMODE((out / MANIFEST).stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE(matrix.stat().st_mode) == 0o666 & ~mask
