"""stdout that cannot be written (issue 50, item 3), for every command's output and every screenshot
(the lists of tests/models/command_outputs.py and tests/explorer/screenshot_outputs.py):

- ``> /dev/full``: one ``error: cannot write to standard output: …`` line, exit 2;
- a reader that has gone (``| true``): a quiet exit, status 141 (128 + SIGPIPE, as a shell reports
  ``cat`` or ``git``), nothing on stderr but notes and progress;
- stdout a user's file appended to (``>>``) when the disk fills: cut back to what it held before.

Before: an ``OSError: [Errno 28]`` or ``BrokenPipeError`` traceback, exit 1 (or 120 when the
interpreter's own flush at exit failed). The runs are forks of one process (tests/forked_runs.py)."""

from __future__ import annotations

import errno
import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from command_outputs import COMMAND_OUTPUTS, command_argv
from encdec_refs import build
from test_pretrained_loader import write_tiny_gpt2

import models.io.stdout as guarded
from models.io.stdout import CLOSED_PIPE, guarded_stdout

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "explorer"))  # the screenshots' list and their inputs

import test_screenshot_hostile as screenshots  # noqa: E402
from screenshot_outputs import SCREENSHOT_OUTPUTS, screenshot_argv  # noqa: E402
from test_atlas_window import fake_atlas  # noqa: E402

from models.reads.atlas import write_atlas  # noqa: E402

RUNNER = HERE.parent / "forked_runs.py"
CASES = ("stdout full", "stdout closed")
RUNS = [(o, c) for o in (*COMMAND_OUTPUTS, *SCREENSHOT_OUTPUTS) for c in CASES]
pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux /dev/full")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("stdout")
    (base / "in").mkdir()
    (base / "in" / "t5").mkdir()
    build(base / "in" / "t5", "t5")
    np.save(base / "in" / "e.npy", np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32))
    inputs = {"decoder": write_tiny_gpt2(base / "in" / "gpt2"), "encdec": base / "in" / "t5",
              "embeddings": base / "in" / "e.npy", "d_model": 16}  # fmt: skip
    (base / "shots").mkdir()
    shot_inputs = screenshots._plain(base / "shots")
    write_atlas(fake_atlas(0), shot_inputs["atlas"])
    runs = []
    for output, case in RUNS:
        folder = base / case.replace(" ", "-") / output.replace(" ", "-")
        folder.mkdir(parents=True)
        if output in COMMAND_OUTPUTS:
            argv = command_argv(output, inputs, folder / "out")
        else:
            argv = [*screenshot_argv(output, shot_inputs), "--screenshot", str(folder / "out.png")]
        runs.append({"argv": argv, "case": case, "cwd": str(folder)})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(runs), capture_output=True, text=True,
                          env=env, timeout=1800)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = dict(zip(RUNS, json.loads(done.stdout.splitlines()[-1])["runs"]))
    return got


def _said(stderr: str) -> list[str]:
    """stderr's lines but notes, warnings and progress (a bar ends in \\r, an atlas's too)."""
    lines = [part for line in stderr.splitlines() for part in line.split("\r")]
    return [e for e in lines if e.strip() and not e.startswith(("note: ", "warning: ", "training [", "atlas "))]


@pytest.mark.parametrize("output, case", RUNS, ids=[f"{o}-{c}" for o, c in RUNS])
def test_stdout_that_cannot_be_written_is_one_line_or_a_quiet_exit(matrix, output, case):
    run = matrix[output, case]
    said = _said(run["stderr"])
    assert "Traceback" not in run["stderr"] and "Exception ignored" not in run["stderr"], run["stderr"][-3000:]
    if case == "stdout full":
        assert run["returncode"] == 2, (run["returncode"], run["stderr"][-3000:])
        assert said == ["error: cannot write to standard output: No space left on device"], said
    else:
        assert run["returncode"] == CLOSED_PIPE and said == [], (run["returncode"], run["stderr"][-3000:])


def test_a_users_file_appended_to_is_cut_back_when_the_disk_fills(tmp_path):
    """``why --json >> log.txt`` when only 100 bytes more fit (a file-size limit): the JSON object
    is not left half-written after the user's own lines."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"the user's earlier lines\n")
    limit = len(log.read_bytes()) + 100

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    argv = [sys.executable, str(ROOT / "main.py"), "why", "--cell", "0,1,0", "--sentence", "The cat sat.", "--json"]
    with open(log, "ab") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True, preexec_fn=cap, timeout=300,
                              env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": ""})  # fmt: skip
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "error: cannot write to standard output: File too large"], done.stderr[-3000:]  # fmt: skip
    assert log.read_bytes() == b"the user's earlier lines\n"


def test_the_guard_cuts_back_a_partial_write_and_keeps_what_came_before(tmp_path, monkeypatch):
    """In-process: the first write goes through, the second writes half and fails (ENOSPC)."""
    path = tmp_path / "out.txt"
    path.write_bytes(b"before\n")
    real, calls = os.write, []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, data)
        real(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with open(path, "a", encoding="utf-8") as f:
        monkeypatch.setattr(sys, "stdout", f)
        with guarded_stdout() as stdout:
            monkeypatch.setattr(guarded.os, "write", write)
            print("first line", flush=True)
            with pytest.raises(guarded.StdoutFailed):
                print("x" * 100, flush=True)
            print("dropped", flush=True)  # after a failure: dropped, never raised again
            monkeypatch.setattr(guarded.os, "write", real)
            code = stdout.finish(0)
    assert code == 2 and path.read_bytes() == b"before\n"
    assert err.getvalue() == "error: cannot write to standard output: No space left on device\n"


def test_without_a_real_stdout_nothing_is_guarded(monkeypatch):
    """A test's captured stdout (no file descriptor) is left as it is."""
    captured = io.StringIO()
    monkeypatch.setattr(sys, "stdout", captured)
    with guarded_stdout() as stdout:
        assert sys.stdout is captured
        print("kept")
        assert stdout.finish(0) == 0
    assert captured.getvalue() == "kept\n"
