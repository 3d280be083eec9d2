"""``main.py explain``: the JSON value is the exported array's cell; errors are one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.cli.explain import explain_main
from models.cli.export import export_main

ROOT = Path(__file__).resolve().parents[2]
INPUT = ["--sentence", "the cat sat on the mat", "--heads", "2", "--d-model", "8", "--pe", "sinusoidal",
         "--mask", "causal", "--bias", "--cross-sentence", "a dog barked", "--score", "additive"]  # fmt: skip


def _explain(capsys, *argv) -> dict:
    assert explain_main(list(argv) + ["--json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))


def _exported(tmp_path, capsys, argv) -> Path:
    out = tmp_path / "run"
    assert export_main(argv + ["--out", str(out)]) == 0
    capsys.readouterr()
    return out


def test_json_value_equals_the_exported_array_for_random_cells(tmp_path, capsys):
    out = _exported(tmp_path, capsys, INPUT)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    rng = np.random.default_rng(0)
    for entry in manifest["stages"]:
        array = np.load(out / entry["file"])
        for _ in range(2):
            cell = tuple(int(rng.integers(0, s)) for s in array.shape)
            got = _explain(capsys, "--stage", entry["name"], "--cell", ",".join(map(str, cell)), *INPUT)
            assert got["stage"] == entry["name"] and got["cell"] == list(cell)
            want = float(array[cell])
            assert got["value"] == (want if np.isfinite(want) else "-inf")
            if "sum_of" in got:
                assert sum(t["value"] for t in got["sum_of"]) == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_json_for_a_pretrained_model(tmp_path, capsys):
    argv = ["--model", "minilm", "--layer", "1", "--sentence", "The cat sat.", "--pad-positions", "2",
            "--mask", "padding"]  # fmt: skip
    out = _exported(tmp_path, capsys, argv)
    weights = np.load(out / "weights.npy")
    got = _explain(capsys, "--stage", "weights", "--cell", "3,1,4", *argv)
    assert got["value"] == float(weights[3, 1, 4])
    assert len(got["exponentials"]) == weights.shape[-1] and got["exp_sum"] > 0
    masked = _explain(capsys, "--stage", "masked", "--cell", "0,0,2", *argv)
    assert masked["value"] == "-inf" and masked["hidden"] and "padding" in masked["why"][0]
    q = _explain(capsys, "--stage", "q", "--cell", "11,4,31", *argv)
    assert q["value"] == float(np.load(out / "q.npy")[11, 4, 31]) and len(q["sum_of"]) == 385


def test_text_output_reads_like_the_notes(capsys):
    assert explain_main(["--stage", "weights", "--cell", "0,2,1", "--sentence", "the cat sat on the mat"]) == 0
    text = capsys.readouterr().out
    assert "a_2,1 = e^(s_2,1 − m) / Σ_l e^(s_2,l − m)" in text and "sums to 1" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stage", "scores", "--cell", "0,1,99"], "outside stage 'scores'"),
        (["--stage", "bogus", "--cell", "0,1"], "unknown stage 'bogus'"),
        (["--stage", "masked", "--cell", "0,1,1"], "has no stage 'masked'"),
        (["--stage", "scores", "--cell", "0,1"], "indexed by 3 numbers"),
        (["--stage", "scores", "--cell", "a,b"], "expected comma-separated integers"),
        (["--cell", "0,1"], "the following arguments are required: --stage"),
    ],
)
def test_errors_are_one_line_and_exit_2(argv, message):
    proc = subprocess.run(
        [sys.executable, "main.py", "explain", *argv, "--sentence", "the cat sat"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr


def test_export_still_takes_the_shared_input_options(tmp_path, capsys):
    out = _exported(tmp_path, capsys, ["--sentence", "a b c", "--heads", "1", "--d-model", "4"])
    assert (out / "weights.npy").exists()
