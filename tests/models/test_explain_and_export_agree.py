"""``explain`` makes the checks ``export`` makes, ``--force`` accepts this tool's own
``--all-layers`` export, and the small inconsistencies of issue 19 are gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_pretrained_loader import write_tiny_gpt2

from models.cli.explain import explain_main
from models.cli.export import export_main
from models.config import InputError
from models.files.run_files import spec_from_args
from models.files.session import load_session

ROOT = Path(__file__).resolve().parents[2]
CELL = ["--stage", "weights", "--cell", "0,1,0"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_tiny_gpt2(tmp_path_factory.mktemp("tiny") / "tiny-gpt2")


def _one_line(capsys, rc) -> str:
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.mark.parametrize(
    "argv, words",
    [(["--model", "minilm", "--sentence", "a b", "--heads", "4"], "--heads does not apply with --model"),
     (["--sentence", "a b", "--layer", "1"], "--layer applies only with --model"),
     (["--model", "minilm", "--sentence", "a b", "--seed", "3", "--score", "dot"], "--score, --seed do not apply"),
     (["--sentence", "a b", "--all-layers"], "--all-layers applies to 'main.py export' only")],
)  # fmt: skip
def test_explain_refuses_options_that_do_not_apply_as_export_does(capsys, tmp_path, argv, words):
    line = _one_line(capsys, explain_main([*CELL, *argv]))
    assert words in line
    if "--all-layers" not in argv:
        assert _one_line(capsys, export_main([*argv, "--out", str(tmp_path / "o")])) == line


def test_explain_refuses_text_that_is_not_utf8(tmp_path):
    sentence = os.fsdecode(b"the \xff cat")
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "explain", *CELL, "--sentence", sentence],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "is not valid UTF-8 text" in lines[0], result.stderr


def test_force_replaces_this_tools_own_all_layers_export(tmp_path, capsys, tiny):
    out = tmp_path / "survey"
    argv = ["--model", str(tiny), "--sentence", "the cat sat", "--all-layers", "--out", str(out)]
    assert export_main(argv) == 0
    first = (out / "attention.npy").stat().st_ino
    assert export_main([*argv, "--force"]) == 0, capsys.readouterr().err
    assert (out / "attention.npy").stat().st_ino != first
    (out / "mine.txt").write_text("the user's")
    assert "also holds files this tool did not write" in _one_line(capsys, export_main([*argv, "--force"]))


@pytest.mark.parametrize("option", [["--stages", "weights"], ["--only-heads", "1"]])
def test_all_layers_refuses_stages_and_only_heads_instead_of_ignoring_them(tmp_path, capsys, tiny, option):
    argv = ["--model", str(tiny), "--sentence", "the cat sat", "--all-layers", *option, "--out", str(tmp_path / "o")]
    assert f"{option[0]} does not apply with --all-layers" in _one_line(capsys, export_main(argv))
    assert not (tmp_path / "o").exists()


def test_an_npz_member_is_treated_alike_by_export_and_the_session(tmp_path, capsys):
    """A weights archive with a member the toy engine does not know: export refuses it, and a
    session made from the same options refuses it with the same words (it used to be dropped)."""
    from models.cli.export import build_parser

    np.savez(tmp_path / "w.npz", W_q=np.ones((2, 8, 4)), W_k=np.ones((2, 8, 4)), W_v=np.ones((2, 8, 4)),
             extra=np.ones(3))  # fmt: skip
    argv = ["--sentence", "a b c", "--heads", "2", "--d-model", "8", "--weights", str(tmp_path / "w.npz")]
    line = _one_line(capsys, export_main([*argv, "--out", str(tmp_path / "o")]))
    assert "unknown arrays: extra" in line
    run = spec_from_args(build_parser().parse_args([*argv, "--out", "x"]))
    assert "weights/extra" in run.arrays
    from models.files.session import Session, save_session

    path = save_session(tmp_path / "s.zip", Session(run))
    with pytest.raises(InputError, match="unknown arrays: extra"):
        load_session(path)
