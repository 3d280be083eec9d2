"""``generate``, ``atlas`` and ``train`` take their options from rows of the one kind, read by the one
converter (models/fields.py: ``add_arguments``, ``check_ranges``): ``--step`` wherever ``--model`` is
taken, one ``--max-new-tokens`` with one set of checks, every option described with its default
(issues 31, 35 items 19 and 20, 36)."""

from __future__ import annotations

import json

import pytest

from main import main
from models.cli.generate import build_parser as generate_parser
from models.command_fields import ATLAS_ROWS, GENERATE_ROWS, TRAIN_ROWS


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_generate_help_describes_every_option_with_its_default(capsys):
    with pytest.raises(SystemExit):
        generate_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for row in GENERATE_ROWS:
        assert row.option in text, row.option
        if row.flag:
            continue
        said = "(required)" if row.dest in ("model", "prompt", "out") else \
            "(default: all)" if row.default is None and row.dest in ("top_k", "top_p") else \
            "'last' (default)" if row.dest == "step" else \
            f"(default: {row.default:g})" if isinstance(row.default, float) else \
            f"(default: {row.default})"  # fmt: skip
        assert said in text, (row.option, said)
    assert "--new-tokens" not in text  # one name (the window's older one is still accepted, unshown)


@pytest.mark.parametrize("command", ["generate", "atlas"])
def test_step_is_taken_wherever_a_model_is(tmp_path, capsys, command):
    """It was refused with an argparse usage block (issue 35 item 19)."""
    extra = ["--prompt", "abcab", "--max-new-tokens", "3", "--json"] if command == "generate" else \
        ["--limit", "2", "--quiet"]  # fmt: skip
    outputs = {}
    for step in ("first", "last"):
        out = tmp_path / f"{command}-{step}"
        assert main([command, "--model", "induction", "--step", step, "--out", str(out), *extra]) == 0
        outputs[step] = capsys.readouterr().out
        assert out.is_dir()
    if command == "generate":  # the untrained first checkpoint does not continue the pattern as the last does
        assert json.loads(outputs["first"])["ids"] != json.loads(outputs["last"])["ids"]
    assert main([command, "--model", "induction", "--step", "123456", "--out", str(tmp_path / "never"), *extra]) == 2
    assert "has no step 123456" in _one_line(capsys)
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("argv, words", [
    (["atlas", "--model", "induction", "--seed", "-1"], "--seed must be from 0 to"),  # was a traceback (issue 36)
    (["atlas", "--model", "induction", "--limit", "0"], "--limit must be at least 1, got 0"),
    (["atlas", "--model", "induction", "--limit", "x"], "argument --limit: invalid int value: 'x'"),
    (["train", "--steps", "0"], "--steps must be from 1 to 1000000, got 0"),
    (["train", "--seed", str(2**32)], "--seed must be from 0 to 4294967295"),
    (["generate", "--model", "induction", "--prompt", "ab"], "the following arguments are required: --out"),
])  # fmt: skip
def test_a_bad_option_is_one_line_and_writes_nothing(tmp_path, capsys, argv, words):
    out = tmp_path / "never"
    assert main([*argv, *(["--out", str(out)] if "required" not in words else [])]) == 2
    assert words in _one_line(capsys)
    assert not out.exists()


def test_the_rows_defaults_are_the_commands_own():
    from models.generate.sampling import GenerateSettings
    from models.reads.detectors import PROBE_SEED
    from models.training.train import TrainConfig

    by = {(name, r.dest): r.default for name, rows in (("g", GENERATE_ROWS), ("a", ATLAS_ROWS), ("t", TRAIN_ROWS))
          for r in rows}  # fmt: skip
    s, t = GenerateSettings(), TrainConfig()
    assert (by["g", "max_new_tokens"], by["g", "temperature"], by["g", "seed"], by["g", "top"]) == (
        s.max_new_tokens, s.temperature, s.seed, s.shown)
    assert (by["t", "steps"], by["t", "seed"], by["a", "seed"]) == (t.steps, t.seed, PROBE_SEED)
