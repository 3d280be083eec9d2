"""Every command under a memory cap (``prlimit --as``), issue 36: Python and torch have started
(the cap is the address space they took plus ``HEADROOM``) and the job does not fit. The memory
check refuses it from the headers, or what runs out anyway is one line: one ``error:`` line naming
memory, exit 2, nothing left beside the user's file, that file byte for byte; never a traceback.

The inputs are 1 GiB sparse files (tests/models/hostile_inputs.py): a model whose embeddings hold
1 GiB, a 1 GiB ``--embeddings`` matrix. ``train`` reads nothing: its cap leaves no room for the job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from command_outputs import COMMAND_OUTPUTS, command_argv
from encdec_refs import build
from hostile_inputs import inflate, sparse_npy
from test_pretrained_loader import write_tiny_gpt2

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "QT_QPA_PLATFORM": "offscreen"}
HEADROOM = 512 << 20  # beyond the imports: half of what the inputs hold
TIGHT = 64 << 20  # train: less than its two steps take (imports included)
BIG = 1 << 30
MEMORY_WORDS = ("of memory but only", "not enough memory", "into memory")
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")


@pytest.fixture(scope="module")
def too_big(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("big")
    write_tiny_gpt2(base / "gpt2")
    (base / "t5").mkdir()
    build(base / "t5", "t5")
    decoder, encdec = inflate(base / "gpt2", base / "gpt2-1g", BIG), inflate(base / "t5", base / "t5-1g", BIG)
    return {"decoder": decoder, "encdec": encdec, "embeddings": sparse_npy(base / "e.npy", (BIG // 4 // 4096, 4096)),
            "d_model": 4096}  # fmt: skip


def capped(argv: list[str], cwd: Path, headroom: int = HEADROOM) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HERE / "capped_child.py"), str(headroom), "--", *argv], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=300)  # fmt: skip


def one_memory_line(result: subprocess.CompletedProcess) -> str:
    err = [e for e in result.stderr.splitlines() if e.strip() and not e.startswith(("training [", "note: "))]
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert any(w in err[0] for w in MEMORY_WORDS), err[0]
    return err[0]


@pytest.mark.parametrize("output", COMMAND_OUTPUTS)
def test_a_job_beyond_a_memory_cap_is_one_line_and_leaves_nothing(tmp_path, too_big, output):
    out = tmp_path / ("out.zip" if output == "session" else "out")
    user = tmp_path / ("out.zip" if output == "session" else "user.bin")
    old = os.urandom(1000)
    user.write_bytes(old)
    result = capped(command_argv(output, too_big, out), tmp_path, TIGHT if output == "train" else HEADROOM)
    one_memory_line(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == [user.name]
    assert user.read_bytes() == old
