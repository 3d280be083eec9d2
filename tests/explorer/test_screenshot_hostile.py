"""Every screenshot × every hostile case (issue 36): the main window's, each ``--view`` and each
window a screenshot saves alone (tests/explorer/screenshot_outputs.py), under a full disk (a tmpfs
in a private mount namespace; ``--fsize`` where none can be mounted), SIGTERM inside the write, a
memory cap, FIFOs, overflowing weights (finite, their scores beyond float32) and a NaN checkpoint. Each run checks
its exit status, one ``error:`` line, no "wrote", nothing left beside the user's old PNG, and that
PNG byte for byte.

The runs are forks of one process that imported everything once (tests/forked_runs.py):
two processes for the whole matrix. Before, a FIFO ``heads.csv`` in an ``--atlas`` folder hung the
window (killed after 300 s), and an ``--attention`` file holding NaN ended in a traceback."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))  # the tiny GPT-2, the sparse inputs
from hostile_inputs import inflate, sparse_npy  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from screenshot_outputs import SCREENSHOT_OUTPUTS, screenshot_argv  # noqa: E402
from test_atlas_window import fake_atlas  # noqa: E402
from test_pretrained_loader import D, gpt2_tensors, write_tiny_gpt2  # noqa: E402

from models.reads.atlas import write_atlas  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNNER = HERE.parent / "forked_runs.py"  # shared with tests/models/test_command_hostile.py
CASES = ("full disk", "signal", "memory cap", "FIFO", "overflowing weights", "NaN checkpoint")
HEADROOM = 512 << 20  # the memory cap: the address space after the imports plus this; the inputs hold 1 GiB
DISK_SIZE = "256k"  # the user's old PNGs, then filled but one page
FSIZE = 2000  # where no tmpfs can be mounted: below every screenshot, above the user's old PNG
OLD = bytes(range(256)) * 4  # the user's file (1 kB, not an image we could make again)
EXPECTED = {  # case: (exit status, words of the one line)
    "full disk": (2, ("No space left", "File too large")),
    "signal": (-15, ("error: interrupted by SIGTERM",)),
    "memory cap": (2, ("of memory but only", "not enough memory", "into memory")),
    "FIFO": (2, ("is a FIFO (named pipe), not a regular file",)),
    "overflowing weights": (2, ("overflows float32", "beyond float32's range", "not a value an atlas holds")),
    "NaN checkpoint": (2, ("holds nan", "contains NaN or infinite values")),
}
# an atlas holds metrics, not weights: its NaN is an undefined metric, shown as an empty cell ("—")
RUNS = [(o, c) for o in SCREENSHOT_OUTPUTS for c in CASES if (o, c) != ("window atlas", "NaN checkpoint")]


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "tmpfs", "/mnt"], capture_output=True)
    return probe.returncode == 0


def _with_steps(folder: Path) -> Path:
    """``folder`` as a model with a training timeline: two steps, each the folder itself."""
    (folder / "checkpoints").mkdir()
    for step in (1, 2):
        (folder / "checkpoints" / f"step-{step}").symlink_to(folder)
    return folder


def _gpt2(folder: Path, change=None) -> Path:
    write_tiny_gpt2(folder)
    if change is not None:
        tensors = gpt2_tensors()
        change(tensors)
        save_file(tensors, str(folder / "model.safetensors"))
    return folder


def _plain(base: Path) -> dict:
    spec = importlib.util.spec_from_file_location("bench_generate", ROOT / "bench" / "bench_generate.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (base / "dec").mkdir()
    bench.write_decoder(base / "dec", layers=2, d=16, heads=2, ffn=32, words=bench.DEMO_WORDS, scale=0.35)
    np.save(base / "w.npy", np.full((2, 3, 4, 4), 0.25))
    toy = ["--sentence", "The cat sat on the mat.", "--heads", "2", "--mask", "causal"]
    return {"toy": toy, "model": "minilm", "steps": "induction", "decoder": base / "dec", "atlas": base / "atlas",
            "attention": base / "w.npy"}  # fmt: skip


def _too_big(base: Path) -> dict:
    small = _gpt2(base / "small")
    with open(base / "atlas" / "heads.csv", "r+b") as table:  # the table, then a hole: 1 GiB of it
        table.truncate(1 << 30)
    big, steps = inflate(small, base / "big", 1 << 30), _with_steps(inflate(small, base / "steps", 1 << 30))
    return {"toy": ["--embeddings", str(sparse_npy(base / "e.npy", (65536, 4096))), "--d-model", "4096"],
            "model": big, "steps": steps, "decoder": big, "atlas": base / "atlas",
            "attention": sparse_npy(base / "a.npy", (1, 1, 16384, 16384))}  # fmt: skip


def _fifos(base: Path) -> dict:
    def fifo(path: Path) -> Path:
        path.unlink(missing_ok=True)
        os.mkfifo(path)
        return path

    model, steps = _gpt2(base / "model"), _with_steps(_gpt2(base / "steps"))
    for folder in (model, steps):
        fifo(folder / "model.safetensors")
    fifo(base / "atlas" / "heads.csv")
    return {"toy": ["--embeddings", str(fifo(base / "e.npy"))], "model": model, "steps": steps, "decoder": model,
            "atlas": base / "atlas", "attention": fifo(base / "a.npy")}  # fmt: skip


def _toy_weights(path: Path, change) -> Path:
    weights = {"W_q": np.full((2, 16, 8), 0.5, np.float32), "W_k": np.full((2, 16, 8), 0.5, np.float32),
               "W_v": np.ones((2, 16, 8), np.float32)}  # fmt: skip
    change(weights)
    np.savez(path, **weights)
    return path


def _overflowing(base: Path) -> dict:
    """Finite weights whose scores leave float32 (q and k × 1e20); an atlas metric and an attention
    value beyond float32."""

    def toy(w):
        w["W_q"] *= 1e20
        w["W_k"] *= 1e20

    def big_qk(t):
        t["h.1.attn.c_attn.weight"][:, : 2 * D] *= 1e20

    heads = base / "atlas" / "heads.csv"
    lines = heads.read_text(encoding="utf-8").splitlines()
    lines[1] = ",".join(c if i < 3 else "inf" for i, c in enumerate(lines[1].split(",")))
    heads.write_text("\n".join(lines) + "\n", encoding="utf-8")
    huge = np.full((2, 3, 4, 4), 0.25)
    huge[0, 0, 0, 0] = 1e300
    return _broken(base, "bigqk", toy, big_qk, huge)


def _nan(base: Path) -> dict:
    """A checkpoint holding one NaN (layer 1's attention; the toy's W_q); an attention file too."""

    def toy(w):
        w["W_q"][1, 1, 1] = np.nan

    def one_nan(t):
        t["h.1.attn.c_attn.weight"][1, 3] = float("nan")

    nan = np.full((2, 3, 4, 4), 0.25)
    nan[0, 0, 0, 0] = np.nan
    return _broken(base, "nan", toy, one_nan, nan)


def _broken(base: Path, name: str, toy, checkpoint, attention: np.ndarray) -> dict:
    """The inputs of one hostile case: the toy's weights changed by ``toy``, a GPT-2 checkpoint (and one
    with training steps) changed by ``checkpoint``, ``attention`` as an attention file."""
    np.save(base / "a.npy", attention)
    model = _gpt2(base / name, checkpoint)
    return {"toy": ["--sentence", "The cat sat on the mat.", "--heads", "2", "--weights",
                    str(_toy_weights(base / "w.npz", toy))], "model": model,
            "steps": _with_steps(_gpt2(base / "steps", checkpoint)), "decoder": model, "atlas": base / "atlas",
            "attention": base / "a.npy"}  # fmt: skip


INPUTS = {"full disk": _plain, "signal": _plain, "memory cap": _too_big, "FIFO": _fifos,
          "overflowing weights": _overflowing, "NaN checkpoint": _nan}  # fmt: skip
SETUP = {"full disk": ("fsize", FSIZE), "signal": ("signal", 0), "memory cap": ("memory", HEADROOM)}


def _runner(runs: list[dict], mount: tuple[Path, Path] | None = None) -> dict:
    """forked_runs.py's answer; with ``mount`` (disk, seed), in a private mount namespace on a full tmpfs."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "QT_QPA_PLATFORM": "offscreen"}
    where = ["unshare", "-rm"] if mount else []
    on_disk = ["--mount", str(mount[0]), DISK_SIZE, str(mount[1])] if mount else []
    done = subprocess.run([*where, sys.executable, str(RUNNER), *on_disk], input=json.dumps(runs),
                          capture_output=True, text=True, env=env, timeout=1800)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict:
    """``{(case, output): {"returncode", "stdout", "stderr", "old_same", "left"}}`` for the whole matrix."""
    base = tmp_path_factory.mktemp("hostile")
    mounted = _can_mount()
    runs, where = [], []
    disk_runs, disk_where = [], []
    seed, disk = base / "seed", base / "disk"
    seed.mkdir()
    for case in CASES:
        folder = base / case.replace(" ", "-")
        (folder / "in").mkdir(parents=True)
        write_atlas(fake_atlas(0), folder / "in" / "atlas")
        inputs = INPUTS[case](folder / "in")
        (folder / "out").mkdir()
        for output in (o for o, c in RUNS if c == case):
            name = output.replace(" ", "-") + ".png"
            if case == "full disk" and mounted:
                (seed / name).write_bytes(OLD)
                disk_runs.append({"argv": [*screenshot_argv(output, inputs), "--screenshot", str(disk / name)],
                                  "case": "plain"})  # fmt: skip
                disk_where.append((case, output))
                continue
            (folder / "out" / name).write_bytes(OLD)
            setup, limit = SETUP.get(case, ("plain", 0))  # a full disk without a tmpfs: a file-size limit
            runs.append({"argv": [*screenshot_argv(output, inputs), "--screenshot", str(folder / "out" / name)],
                         "case": setup, "limit": limit})  # fmt: skip
            where.append((case, output))
    got = {}
    for (case, output), run in zip(where, _runner(runs)["runs"]):
        out = base / case.replace(" ", "-") / "out"
        stem = output.replace(" ", "-")
        left = sorted(p.name for p in out.iterdir() if p.name.startswith((f".{stem}", f"{stem}_")))
        got[case, output] = {**run, "old_same": (out / f"{stem}.png").read_bytes() == OLD, "left": left}
    if disk_runs:
        result = _runner(disk_runs, (disk, seed))
        old = hashlib.sha256(OLD).hexdigest()
        for (case, output), run in zip(disk_where, result["runs"]):
            name = output.replace(" ", "-") + ".png"
            left = sorted(set(result["disk"]) - {p.name for p in seed.iterdir()} - {"filler.bin"})
            got[case, output] = {**run, "old_same": result["disk"].get(name) == old, "left": left}
    return got


@pytest.mark.parametrize("output, case", RUNS, ids=[f"{o}-{c}" for o, c in RUNS])
def test_a_hostile_case_is_one_line_and_keeps_the_users_png(matrix, output, case):
    run = matrix[case, output]
    code, words = EXPECTED[case]
    err = [e for e in run["stderr"].splitlines() if e.strip() and not e.startswith("note:")]
    assert run["returncode"] == code, (run["returncode"], run["stderr"][-3000:])
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in run["stderr"], run["stderr"][-3000:]
    assert any(w in err[0] for w in words), err[0]
    assert "wrote" not in run["stdout"], run["stdout"]
    assert run["old_same"] and run["left"] == [], run["left"]
