"""One way to write an image (issue 36, item 1): every screenshot, of every ``--view`` and of every
window beside the main one, is rendered into memory and written atomically, so a write that fails
(a full disk) is one ``error:`` line on stderr, exit 2, no "wrote", nothing left, and the user's
old PNG byte for byte. Before, ``--view compare|model|metrics|rollout|pe-lens``, ``--timeline``,
``--generate`` and ``--atlas`` wrote straight into the target (``grab().save``)."""

from __future__ import annotations

import ast
import errno
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage

from explorer.app import build_parser, run_app
from explorer.files.view_shots import VIEWS as VIEW_CHOICES

ROOT = Path(__file__).resolve().parents[2]
TOY = ["--sentence", "The cat sat on the mat.", "--heads", "2", "--mask", "causal"]
MODEL = ["--model", "minilm", "--sentence", "The cat sat on the mat."]
VIEWS = VIEW_CHOICES  # the code's own list, the one --view offers
WINDOWS = ("timeline", "generate", "atlas", "attention")  # the windows a screenshot saves alone


def _view_argv(view: str) -> list[str]:
    extra = ["--mask", "custom"] if view == "mask" else []
    return [*(MODEL if view in ("model", "metrics", "rollout") else TOY), *extra, "--view", view]


def _window_argv(window: str, tmp: Path) -> list[str]:
    if window == "timeline":
        return ["--model", "induction", "--sentence", "abcdabcd", "--timeline"]
    if window == "generate":
        spec = importlib.util.spec_from_file_location("bench_generate", ROOT / "bench" / "bench_generate.py")
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
        (tmp / "dec").mkdir()
        bench.write_decoder(tmp / "dec", layers=2, d=16, heads=2, ffn=32, words=bench.DEMO_WORDS, scale=0.35)
        return ["--generate", "the cat", "--model", str(tmp / "dec"), "--new-tokens", "2"]
    if window == "atlas":
        from test_atlas_window import fake_atlas

        from models.reads.atlas import write_atlas

        write_atlas(fake_atlas(0), tmp / "atlas")
        return ["--atlas", str(tmp / "atlas")]
    np.save(tmp / "w.npy", np.full((2, 3, 4, 4), 0.25))
    return ["--attention", str(tmp / "w.npy")]


def _old_png(path: Path) -> bytes:
    image = QImage(4, 4, QImage.Format.Format_RGB32)
    image.fill(0x336699)
    assert image.save(str(path), "PNG")
    return path.read_bytes()


@pytest.fixture
def disk_full_at(monkeypatch):
    """Every write to ``target`` fails when it reaches the disk (``fsync``: ENOSPC), as a full disk
    does; a write into the target itself (not through the atomic writer) is not stopped, so it
    shows as a changed file."""
    targets: list[Path] = []
    real_fsync = os.fsync

    def fsync(fd):
        name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
        if any(name.startswith(f".{t.name}.partial-") or name == t.name for t in targets):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return targets.append


def _check_refused(capsys, argv, out: Path, old: bytes) -> None:
    code = run_app([*argv, "--screenshot", str(out)])
    captured = capsys.readouterr()
    err = [line for line in captured.err.splitlines() if line.strip() and not line.startswith("note:")]
    assert code == 2, (code, captured.out, captured.err)
    assert len(err) == 1 and err[0].startswith("error: ") and "No space left" in err[0], captured.err
    assert f"wrote {out}" not in captured.out and "error" not in captured.out, captured.out
    assert out.read_bytes() == old
    assert [p.name for p in out.parent.iterdir() if ".partial-" in p.name] == []


@pytest.mark.parametrize("view", VIEWS)
def test_a_failed_view_screenshot_keeps_the_old_png_and_is_one_line(qtbot, tmp_path, capsys, disk_full_at, view):
    out = tmp_path / "old.png"
    old = _old_png(out)
    disk_full_at(out)
    _check_refused(capsys, _view_argv(view), out, old)


@pytest.mark.parametrize("window", WINDOWS)
def test_a_failed_window_screenshot_keeps_the_old_png_and_is_one_line(qtbot, tmp_path, capsys, disk_full_at, window):
    argv = _window_argv(window, tmp_path)
    out = tmp_path / "old.png"
    old = _old_png(out)
    disk_full_at(out)
    _check_refused(capsys, argv, out, old)


def test_the_other_windows_are_the_options_that_save_a_window_alone():
    """The list above is the parser's: every window option whose screenshot is that window alone;
    the views are those --view offers."""
    assert "--view" in build_parser().format_help() and all(v in build_parser().format_help() for v in VIEWS)
    dests = set(vars(build_parser().parse_args([])))  # every option's name
    assert set(WINDOWS) <= dests


def test_no_image_is_saved_anywhere_but_through_the_one_writer():
    """No ``grab().save(...)`` / ``QImage.save(path)`` outside explorer/files/image_export.py: every
    image reaches the disk through ``write_bytes`` (models.io.atomic)."""
    offenders = []
    for path in (ROOT / "explorer").rglob("*.py"):
        if path.name == "image_export.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "save":
                owner = ast.unparse(node.func.value)
                if "grab" in owner or "image" in owner.lower() or "pixmap" in owner.lower():
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
