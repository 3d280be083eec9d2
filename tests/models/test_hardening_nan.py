"""One gate for non-finite numbers (issue 36, item 5): NaN or ±∞ in a result is refused by name
(encoder-decoder ``--all-layers``, ``generate``), and a metric that is not defined is an empty cell
in a table (``heads.csv`` of ``--all-layers`` and ``atlas``), never ``nan``.

Before: encoder-decoder ``--all-layers`` with overflowing q/k wrote NaN attention and heads.csv
with exit 0; heads.csv held ``nan`` for cross-attention and one-token sentences; ``generate`` on a
model whose scores overflow stopped on a ValueError traceback writing its JSON."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from encdec_refs import SOURCE, TARGET, build
from safetensors.torch import load_file, save_file
from test_pretrained_loader import D, gpt2_tensors, write_tiny_gpt2

from models.cli.atlas import atlas_main
from models.cli.export import export_main
from models.cli.generate import generate_main
from models.engine.finite import UNDEFINED, csv_float, csv_number
from models.files.survey_export import read_heads_csv
from models.reads.atlas import read_atlas
from models.reads.survey import METRIC_NAMES


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> Path:
    return write_tiny_gpt2(tmp_path_factory.mktemp("gpt2") / "tiny")


@pytest.fixture(scope="module")
def big_qk(tmp_path_factory) -> Path:
    """A GPT-2 whose layer 1 query and key projections are scaled by 1e20."""
    folder = write_tiny_gpt2(tmp_path_factory.mktemp("bigqk") / "big-qk")
    tensors = gpt2_tensors()
    tensors["h.1.attn.c_attn.weight"][:, : 2 * D] *= 1e20
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


@pytest.fixture(scope="module")
def t5(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("t5") / "tiny-t5"
    folder.mkdir()
    build(folder, "t5")
    return folder


def _one_line(capsys, rc: int) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), captured
    assert "Traceback" not in captured.err and "nan" not in captured.out.lower()
    return lines[0]


def _no_nan_cells(path: Path) -> list[list[str]]:
    text = path.read_text(encoding="utf-8")
    assert "nan" not in text.lower() and "inf" not in text.lower(), text
    return [line.split(",") for line in text.splitlines()[1:]]


def test_the_gate_writes_an_undefined_value_as_an_empty_cell_and_reads_it_back():
    assert [csv_number(v) for v in (0.25, math.nan, math.inf, -math.inf)] == ["0.25", UNDEFINED, UNDEFINED, UNDEFINED]
    assert math.isnan(csv_float(UNDEFINED)) and math.isnan(csv_float("nan")) and csv_float("0.25") == 0.25


@pytest.mark.parametrize("case", ["one-token", "cross"])
def test_heads_csv_never_holds_nan(tmp_path, capsys, gpt2, t5, case):
    out = tmp_path / "out"
    argv = (["--model", str(gpt2), "--sentence", "the"] if case == "one-token" else
            ["--model", str(t5), "--sentence", SOURCE, "--cross-sentence", TARGET, "--block", "cross"])  # fmt: skip
    assert export_main([*argv, "--all-layers", "--out", str(out)]) == 0, capsys.readouterr().err
    rows = _no_nan_cells(out / "heads.csv")
    undefined = {"one-token": "previous", "cross": "self"}[case]  # a metric without meaning here
    column = 2 + METRIC_NAMES.index(undefined)
    assert rows and all(row[column] == UNDEFINED for row in rows)
    back = read_heads_csv(out / "heads.csv")
    assert np.isnan(back[undefined]).all() and np.isfinite(back["entropy"]).all()


def test_an_atlas_without_detectors_writes_empty_cells_not_nan(tmp_path, gpt2):
    out = tmp_path / "atlas"
    assert atlas_main(["--model", str(gpt2), "--out", str(out), "--no-detectors", "--quiet"]) == 0
    _no_nan_cells(out / "heads.csv")
    atlas = read_atlas(out)
    assert np.isnan(atlas.columns["induction"]).all()


def test_encoder_decoder_all_layers_with_overflowing_qk_is_refused_by_name(tmp_path, capsys, t5):
    tensors = load_file(str(t5 / "model.safetensors"))
    for name in ("q", "k"):
        tensors[f"encoder.block.1.layer.0.SelfAttention.{name}.weight"] *= 1e20
    hostile = tmp_path / "big-qk-t5"
    hostile.mkdir()
    for f in t5.iterdir():
        if f.name != "model.safetensors":
            (hostile / f.name).write_bytes(f.read_bytes())
    save_file(tensors, str(hostile / "model.safetensors"))
    out = tmp_path / "out"
    argv = ["--model", str(hostile), "--sentence", SOURCE, "--cross-sentence", TARGET, "--block", "encoder",
            "--all-layers", "--out", str(out)]  # fmt: skip
    line = _one_line(capsys, export_main(argv))
    assert "overflows float32" in line and "encoder layer 1" in line and "queries and keys" in line
    assert not out.exists() and not any(".partial-" in p.name for p in tmp_path.iterdir())


def test_generate_refuses_nan_by_name_never_a_traceback(tmp_path, capsys, big_qk):
    out = tmp_path / "gen"
    line = _one_line(capsys, generate_main(["--model", str(big_qk), "--prompt", "the cat sat", "--max-new-tokens",
                                            "3", "--out", str(out)]))  # fmt: skip
    assert "overflows float32" in line and "layer 1" in line and "queries and keys" in line
    assert not out.exists() and not any(".partial-" in p.name for p in tmp_path.iterdir())


@pytest.fixture(scope="module")
def nan_checkpoint(tmp_path_factory) -> Path:
    """A GPT-2 whose layer 1 attention weights hold one NaN."""
    folder = write_tiny_gpt2(tmp_path_factory.mktemp("nan") / "nan-gpt2")
    tensors = gpt2_tensors()
    tensors["h.1.attn.c_attn.weight"][1, 3] = float("nan")
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def _commands(model: Path, out: Path) -> dict:
    """Every command that reads a model, with what it writes."""
    from models.cli.explain import explain_main

    sentence = ["--sentence", "the cat sat"]
    return {
        "export": (export_main, ["--model", str(model), *sentence, "--out", str(out)]),
        "all-layers": (export_main, ["--model", str(model), *sentence, "--all-layers", "--out", str(out)]),
        "explain": (explain_main, ["--model", str(model), *sentence, "--stage", "weights", "--cell", "0,1,0"]),
        "generate": (generate_main, ["--model", str(model), "--prompt", "the cat", "--max-new-tokens", "2",
                                     "--out", str(out)]),  # fmt: skip
        "atlas": (atlas_main, ["--model", str(model), "--out", str(out), "--quiet"]),
    }


@pytest.mark.parametrize("command", ["export", "all-layers", "explain", "generate", "atlas"])
def test_a_nan_checkpoint_is_one_line_for_every_command(tmp_path, capsys, nan_checkpoint, command):
    main, argv = _commands(nan_checkpoint, tmp_path / "out")[command]
    line = _one_line(capsys, main(argv))
    assert "holds nan" in line and "h.1.attn.c_attn.weight" in line, line
    assert not (tmp_path / "out").exists()
