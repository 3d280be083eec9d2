"""``bench/bench_gpu.py --cpu-smoke`` runs every row of issue 45's table tiny on the CPU (its figures
mean nothing there): every section gives its rows, none fails, and the script imports neither Qt nor
the explorer (a GPU box has no PySide6: importing either is made to fail here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NO_QT = ("import runpy, sys\n"
         "for name in ('PySide6', 'pyqtgraph', 'explorer', 'superqt'): sys.modules[name] = None\n"
         "sys.argv = ['bench_gpu.py', '--cpu-smoke']\n"
         "runpy.run_path({path!r}, run_name='__main__')\n")  # fmt: skip


def test_the_cpu_smoke_run_prints_every_row_without_qt(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path))
    code = NO_QT.format(path=str(ROOT / "bench" / "bench_gpu.py"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert "FAILED" not in done.stdout, done.stdout
    figures = " ".join(line.split("|")[1] for line in table)
    for figure in ("generation (ms per token)", "one layer's trace", "overview", "atlas (texts per second)",
                   "8B-shape LLaMA, bfloat16"):  # fmt: skip
        assert figure in figures, done.stdout
    assert "equal to transformers where not tied" in done.stdout and "same tokens" in done.stdout
