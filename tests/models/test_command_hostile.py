"""Every command's output × the hostile inputs (issue 36): a memory cap (``prlimit --as``: Python
and torch have started, the job does not fit), FIFOs where files are read, overflowing weights and
a NaN checkpoint. Each run checks its exit status, one ``error:`` line (never a traceback),
nothing left beside the user's file, and that file byte for byte. The outputs are
tests/models/command_outputs.py's list; a full disk, a file-size limit and signals are run on the
same list by test_full_disk.py and test_writer_signals.py.

The memory cap's inputs are 1 GiB sparse files (hostile_inputs.py): a model whose embeddings hold
1 GiB, a 1 GiB ``--embeddings`` matrix; ``train`` reads nothing, so its cap leaves no room for the
job itself. The runs are forks of one process (tests/forked_runs.py). "Overflowing weights" are
finite weights whose scores leave float32 (q and k × 1e20); a "NaN checkpoint" holds one NaN.

Before: under a memory cap every command reading a model said "could not read model.safetensors
(truncated or corrupt?): Cannot allocate memory", and ``train`` ended in a MemoryError traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from command_outputs import COMMAND_OUTPUTS, command_argv
from encdec_refs import build
from hostile_inputs import inflate, sparse_npy
from safetensors.torch import load_file, save_file
from test_pretrained_loader import gpt2_tensors, write_tiny_gpt2

HERE = Path(__file__).resolve().parent
RUNNER = HERE.parent / "forked_runs.py"
CASES = ("memory cap", "FIFO", "overflowing weights", "NaN checkpoint")
READS_NOTHING = {"train"}  # no input file: no FIFO, no weights ("—"; its memory cap is tried)
HEADROOM = 512 << 20  # beyond the imports: half of what the inputs hold
TIGHT = 64 << 20  # train: less than its two steps take (refused by its estimate, models.training.train)
BIG = 1 << 30
EXPECTED = {  # case: words of the one line (exit status 2)
    "memory cap": ("of memory but only", "not enough memory", "into memory"),
    "FIFO": ("is a FIFO (named pipe), not a regular file",),
    "overflowing weights": ("overflows float32",),
    "NaN checkpoint": ("holds nan", "contains NaN or infinite values"),
}
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")


def _t5(folder: Path, change=None) -> Path:
    folder.mkdir()
    build(folder, "t5")
    if change is not None:
        tensors = load_file(str(folder / "model.safetensors"))
        change(tensors)
        save_file(tensors, str(folder / "model.safetensors"))
    return folder


def _too_big(base: Path) -> dict:
    small_gpt2, small_t5 = write_tiny_gpt2(base / "gpt2"), _t5(base / "t5")
    return {"decoder": inflate(small_gpt2, base / "gpt2-1g", BIG), "encdec": inflate(small_t5, base / "t5-1g", BIG),
            "embeddings": sparse_npy(base / "e.npy", (BIG // 4 // 4096, 4096)), "d_model": 4096}  # fmt: skip


def _fifos(base: Path) -> dict:
    decoder, encdec = write_tiny_gpt2(base / "gpt2"), _t5(base / "t5")
    for path in (decoder / "model.safetensors", encdec / "model.safetensors", base / "e.npy"):
        path.unlink(missing_ok=True)
        os.mkfifo(path)
    return {"decoder": decoder, "encdec": encdec, "embeddings": base / "e.npy", "d_model": 16}


def _weights(base: Path, change) -> tuple[Path, Path, Path]:
    """(a GPT-2, a T5, a toy --weights file), each changed by ``change(tensors, names)``."""
    gpt2 = write_tiny_gpt2(base / "gpt2")
    tensors = gpt2_tensors()
    change(tensors, ["h.0.attn.c_attn.weight", "h.1.attn.c_attn.weight"])  # every layer: explain traces 0
    save_file(tensors, str(gpt2 / "model.safetensors"))
    blocks = [f"encoder.block.{i}.layer.0.SelfAttention.{w}.weight" for i in (0, 1) for w in ("q", "k")]
    t5 = _t5(base / "t5", lambda t: change(t, blocks))
    toy = {"W_q": np.full((2, 16, 8), 0.5, np.float32), "W_k": np.full((2, 16, 8), 0.5, np.float32),
           "W_v": np.ones((2, 16, 8), np.float32)}  # fmt: skip
    change(toy, ["W_q", "W_k"])
    np.savez(base / "w.npz", **toy)
    return gpt2, t5, base / "w.npz"


def _overflowing(base: Path) -> dict:
    """Finite weights whose scores leave float32: q and k (every layer's; the toy's) × 1e20."""

    def scale(tensors, names):
        for name in names:
            tensors[name][...] = tensors[name] * 1e20

    return _toy_and_models(base, *_weights(base, scale))


def _nan(base: Path) -> dict:
    """A checkpoint holding one NaN (layer 0's attention; the toy's W_q)."""

    def nan(tensors, names):
        tensors[names[0]][(1,) * tensors[names[0]].ndim] = float("nan")

    return _toy_and_models(base, *_weights(base, nan))


def _toy_and_models(base: Path, gpt2: Path, t5: Path, weights: Path) -> dict:
    np.save(base / "e.npy", np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32))
    return {"decoder": gpt2, "encdec": t5, "embeddings": base / "e.npy", "d_model": 16,
            "toy": ["--weights", str(weights)]}


INPUTS = {"memory cap": _too_big, "FIFO": _fifos, "overflowing weights": _overflowing, "NaN checkpoint": _nan}


def _target(folder: Path, output: str) -> tuple[Path, Path]:
    """(where the output goes, the user's file: the old session itself, or a file beside a folder)."""
    return (folder / "out.zip", folder / "out.zip") if output == "session" else (folder / "out", folder / "user.bin")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict:
    """``{(case, output): run}`` with ``old_same`` and ``left``; every run a fork of one process."""
    base = tmp_path_factory.mktemp("hostile")
    runs, where = [], []
    for case in CASES:
        (base / case / "in").mkdir(parents=True)
        inputs = INPUTS[case](base / case / "in")
        for output in (o for o, c in RUNS if c == case):
            folder = base / case / output
            folder.mkdir()
            out, user = _target(folder, output)
            user.write_bytes(b"the user's own file, which must survive")
            memory = ("memory", TIGHT if output in READS_NOTHING else HEADROOM) if case == "memory cap" else None
            setup, limit = memory or ("plain", 0)
            runs.append({"argv": command_argv(output, inputs, out), "case": setup, "limit": limit, "cwd": str(folder)})
            where.append((case, output))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(runs), capture_output=True, text=True,
                          env=env, timeout=1800)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = {}
    for (case, output), run in zip(where, json.loads(done.stdout.splitlines()[-1])["runs"]):
        folder = base / case / output
        _, user = _target(folder, output)
        got[case, output] = {**run, "old_same": user.read_bytes() == b"the user's own file, which must survive",
                             "left": sorted(p.name for p in folder.iterdir() if p != user)}  # fmt: skip
    return got


RUNS = [(o, c) for o in COMMAND_OUTPUTS for c in CASES if c == "memory cap" or o not in READS_NOTHING]


@pytest.mark.parametrize("output, case", RUNS, ids=[f"{o}-{c}" for o, c in RUNS])
def test_a_hostile_input_is_one_line_and_leaves_only_the_users_file(matrix, output, case):
    run = matrix[case, output]
    err = [e for e in run["stderr"].splitlines() if e.strip() and not e.startswith(("training [", "note: "))]
    assert run["returncode"] == 2, (run["returncode"], run["stderr"][-3000:])
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in run["stderr"], run["stderr"][-3000:]
    assert any(w in err[0] for w in EXPECTED[case]), err[0]
    assert run["old_same"] and run["left"] == [], run["left"]
