"""The export command and output folders: what is refused and what is left behind."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

from export_refs import assert_refused as _assert_refused
from export_refs import leftovers as _leftovers
from export_refs import save_that_fails_on_call as _save_that_fails_on_call

from models.cli.export import export_main
from models.files.export import read_trace_files

ROOT = Path(__file__).resolve().parents[2]


def test_cli_refuses_a_non_empty_output_folder_and_leaves_it_alone(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    rc = export_main(["--sentence", "a b", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert "exists and is not empty (use --force to replace it)" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert _leftovers(tmp_path) == []


def test_cli_force_with_bad_input_keeps_the_previous_folder(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert export_main(["--sentence", "", "--out", str(out), "--force"]) == 2
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert _leftovers(tmp_path) == []


def test_cli_refuses_an_output_path_that_is_a_file(tmp_path, capsys):
    (tmp_path / "run").write_text("a file")
    rc = export_main(["--sentence", "a b", "--out", str(tmp_path / "run")])
    assert rc == 2 and "exists and is not a folder" in capsys.readouterr().err
    assert (tmp_path / "run").read_text() == "a file"


def test_cli_refuses_an_output_path_whose_parent_is_a_file(tmp_path, capsys):
    (tmp_path / "plain").write_text("a file")
    _assert_refused(capsys, ["--sentence", "a b"], tmp_path / "plain" / "run", "cannot write to")
    assert (tmp_path / "plain").read_text() == "a file"


def test_cli_refuses_an_unwritable_location(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        if os.access(locked, os.W_OK):
            # Running as root: permissions are not enforced, so use a parent that is a file.
            (tmp_path / "plain").write_text("a file")
            target = tmp_path / "plain" / "run"
        else:
            target = locked / "run"
        _assert_refused(capsys, ["--sentence", "a b"], target, "cannot write to")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_cli_export_interrupted_by_a_full_disk_reports_it_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    _save_that_fails_on_call(monkeypatch, 5, OSError(errno.ENOSPC, "No space left on device"))
    _assert_refused(capsys, ["--sentence", "a b c"], tmp_path / "run", "No space left on device")
    assert list(tmp_path.iterdir()) == []


# --- through main.py in a real process -----------------------------------------------------------------


def test_main_py_export_subprocess_succeeds_and_fails_cleanly(tmp_path):
    ok = subprocess.run(
        [sys.executable, "main.py", "export", "--sentence", "Hello, world 🌍!", "--out", str(tmp_path / "run")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "wrote 13 stages" in ok.stdout  # 11 + weighted_norms, value_norms
    man, _ = read_trace_files(tmp_path / "run")
    assert man["key_tokens"] == ["Hello", ",", "world", "🌍", "!"]

    bad = subprocess.run(
        [sys.executable, "main.py", "export", "--sentence", "a b", "--heads", "3", "--out", str(tmp_path / "bad")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.startswith("error: d_model=16 is not divisible by heads=3") and bad.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_cli_says_the_parent_is_a_file_rather_than_missing(tmp_path, capsys):
    # Regression: a parent that is a file was reported as a folder that "does not exist".
    (tmp_path / "plain").write_text("a file")
    _assert_refused(capsys, ["--sentence", "a b"], tmp_path / "plain" / "run", "is a file, not a folder")


def test_cli_refuses_a_blank_second_sentence(tmp_path, capsys):
    # Regression: --cross-sentence "" silently fell back to self-attention.
    _assert_refused(capsys, ["--sentence", "a b", "--cross-sentence", "  "], tmp_path / "run", "second sentence")


def test_cli_force_never_replaces_the_current_folder(tmp_path, capsys, monkeypatch):
    # Regression: `--out . --force` tried to rename the folder the user is standing in.
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("mine")
    monkeypatch.chdir(work)
    rc = export_main(["--sentence", "a b", "--out", ".", "--force"])
    assert rc == 2 and "contains the current folder" in capsys.readouterr().err
    assert (work / "keep.txt").read_text() == "mine"
