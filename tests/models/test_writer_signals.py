"""One writer discipline (issue 19): for every output, SIGTERM, SIGHUP and SIGINT during the write
leave no temporary and at most one line; a file-size limit (``prlimit --fsize``) is one line and
leaves the old file whole. Each writer is run in a child process (``writer_child.py``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from command_outputs import WRITES, history_of
from test_pretrained_loader import write_tiny_gpt2

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOY = ["--sentence", "the cat sat on the mat", "--heads", "2", "--d-model", "8"]
ENV = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    folder = write_tiny_gpt2(tmp_path_factory.mktemp("tiny") / "tiny-gpt2")
    from encdec_refs import build  # an encoder-decoder beside it (tiny.parent / "t5"), for its --all-layers

    (folder.parent / "t5").mkdir()
    build(folder.parent / "t5", "t5")
    return folder


def _writers(tmp: Path, tiny: Path) -> dict[str, tuple[str, list[str], Path]]:
    """name: (suffix of the temporary to pause in, main.py arguments, the output)."""
    return {
        "export": ("/", ["export", *TOY, "--out", str(tmp / "out")], tmp / "out"),
        "all-layers": ("/", ["export", "--model", str(tiny), "--sentence", "the cat sat", "--all-layers",
                             "--out", str(tmp / "out")], tmp / "out"),  # fmt: skip
        "screenshot": (".png", [*TOY, "--screenshot", str(tmp / "out.png")], tmp / "out.png"),
        "session": (".zip", [*TOY, "--screenshot", str(tmp / "shot.png"), "--save-session", str(tmp / "out.zip")],
                    tmp / "out.zip"),  # fmt: skip
        # issue 36: the commands beside export (generate continues the tiny GPT-2's prompt)
        "generate": ("/", ["generate", "--model", str(tiny), "--prompt", "the cat", "--max-new-tokens", "2",
                           "--out", str(tmp / "out")], tmp / "out"),  # fmt: skip
        "atlas": ("/", ["atlas", "--model", str(tiny), "--out", str(tmp / "out"), "--quiet"], tmp / "out"),
        "timeline": ("/", ["timeline", "--model", str(history_of(tiny)), "--out", str(tmp / "out"), "--quiet"],
                     tmp / "out"),  # fmt: skip
        "encdec-all-layers": ("/", ["export", "--model", str(tiny.parent / "t5"), "--sentence", "the cat sat",
                                    "--cross-sentence", "die katze", "--all-layers", "--block", "cross",
                                    "--out", str(tmp / "out")], tmp / "out"),  # fmt: skip
        "train": ("/", ["train", "--steps", "2", "--out", str(tmp / "out")], tmp / "out"),
    }


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial-" in p.name or ".old-" in p.name)


# every output that reaches the disk (tests/models/command_outputs.py), and the main window's screenshot
# (every screenshot: tests/explorer/test_screenshot_hostile.py)
SIGNALLED = ["screenshot", *WRITES]


CASES = [(w, signal.SIGTERM) for w in SIGNALLED] + [(w, s) for w in ("export", "all-layers")
                                                  for s in (signal.SIGHUP, signal.SIGINT)]  # fmt: skip


@pytest.mark.parametrize("writer, sig", CASES, ids=[f"{w}-{s.name}" for w, s in CASES])
def test_a_signal_during_a_write_leaves_no_temporary_and_one_line(tmp_path, tiny, writer, sig):
    suffix, argv, out = _writers(tmp_path, tiny)[writer]
    child = subprocess.Popen([sys.executable, str(HERE / "writer_child.py"), suffix, "--", *argv], cwd=tmp_path,
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = ""
        deadline = time.monotonic() + 120
        while not line.startswith("PAUSED") and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line and child.poll() is not None:
                break
        assert line.startswith("PAUSED"), (line, child.stderr.read() if child.poll() is not None else "")
        assert _leftovers(tmp_path), "the child paused with its temporary in place"
        child.send_signal(sig)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode in (-sig, 128 + sig), (child.returncode, err)
    lines = [e for e in err.splitlines() if e.strip() and not e.startswith("training [")]  # train's progress bar
    assert len(lines) == 1 and lines[0].startswith("error: interrupted"), err
    assert "Traceback" not in err
    assert _leftovers(tmp_path) == [] and not out.exists(), os.listdir(tmp_path)


def _limit(argv: list[str], cwd: Path, size: int) -> subprocess.CompletedProcess:
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit is not installed")
    return subprocess.run(["prlimit", f"--fsize={size}", sys.executable, str(ROOT / "main.py"), *argv], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=180)  # fmt: skip


@pytest.mark.parametrize("writer", SIGNALLED)
def test_a_file_size_limit_is_one_line_and_keeps_the_old_output(tmp_path, tiny, writer):
    _, argv, out = _writers(tmp_path, tiny)[writer]
    if writer == "session":  # the screenshot before it must fit: a session with a big matrix instead
        np.save(tmp_path / "e.npy", np.random.default_rng(0).standard_normal((200, 400)))
        argv = ["--embeddings", str(tmp_path / "e.npy"), "--d-model", "400", "--heads", "2",
                "--screenshot", str(tmp_path / "shot.png"), "--save-session", str(out)]  # fmt: skip
    old = b"the user's own file, which must survive"
    if out.suffix:
        out.write_bytes(old)
    limit = 3000 if out.suffix else 500  # below the largest file each writer writes
    if writer == "session":
        subprocess.run([sys.executable, str(ROOT / "main.py"), *argv[:-2], "--save-session", str(tmp_path / "x.zip")],
                       cwd=tmp_path, env=ENV, capture_output=True, timeout=180)  # fmt: skip
        limit = max((tmp_path / "shot.png").stat().st_size + 1, (tmp_path / "x.zip").stat().st_size // 2)
        (tmp_path / "x.zip").unlink()
    result = _limit(argv, tmp_path, limit)
    err = [e for e in result.stderr.splitlines() if e.strip()]
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(err) == 1 and err[0].startswith("error: ") and "File too large" in err[0], result.stderr
    assert _leftovers(tmp_path) == []
    if out.suffix:
        assert out.read_bytes() == old
    else:
        assert not out.exists()


def test_a_file_size_limit_on_a_view_screenshot_keeps_the_old_png(tmp_path):
    """Issue 36's reproduction: under ``prlimit --fsize=20000``, ``--view compare --screenshot OLD.png``
    exited 0, printed "wrote" and left OLD.png cut to 20,000 bytes (``grab().save`` into the target)."""
    out = tmp_path / "old.png"
    old = bytes(range(256)) * 8  # the user's file: smaller than the limit, not an image we could remake
    out.write_bytes(old)
    result = _limit([*TOY, "--view", "compare", "--screenshot", str(out)], tmp_path, 20000)
    err = [e for e in result.stderr.splitlines() if e.strip()]
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(err) == 1 and err[0].startswith("error: ") and "File too large" in err[0], result.stderr
    assert "wrote" not in result.stdout
    assert out.read_bytes() == old and _leftovers(tmp_path) == []
