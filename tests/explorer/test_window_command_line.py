"""The window's command line is export's (issue 36 item 7, issue 35 items 19 and 20): the same checks,
the same refusals, one ``error:`` line and exit status 2, before a window opens; nothing substituted,
clamped or dropped. ``main.py --help`` lists every command."""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer.app import run_app
from main import COMMANDS, main
from models.cli.export import export_main
from models.cli.generate import generate_main
from models.files.session import Session, save_session
from models.runspec import RunSpec

FIVE = "the cat sat on mats"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err.strip()


def test_main_help_lists_every_command_with_a_line_each(capsys):
    assert main(["--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in (*COMMANDS, "[options]"):
        assert sum(line.startswith(f"  main.py {name} ") for line in lines) == 1, name
    assert set(COMMANDS) >= {"export", "explain", "generate", "atlas", "train"}
    for name in COMMANDS:  # and each command's own --help works
        assert main([name, "--help"]) == 0, name
        assert capsys.readouterr().out.startswith(f"usage: main.py {name}")


def test_pad_positions_past_the_sentence_are_refused_with_exports_line(tmp_path, capsys):
    """Used to open with the mask not applied, exit 0, and save a session export refused."""
    options = ["--sentence", FIVE, "--mask", "padding", "--pad-positions", "500"]
    assert export_main([*options, "--out", str(tmp_path / "e")]) == 2
    export_line = _one_line(capsys)
    assert run_app([*options, "--screenshot", str(tmp_path / "w.png")]) == 2
    assert _one_line(capsys) == export_line == "error: pad position(s) [500] out of range: there are 5 keys (0..4)"
    assert not (tmp_path / "w.png").exists()


@pytest.mark.parametrize("model", [[], ["--model", "minilm"]])
def test_a_sentence_that_is_not_utf8_is_refused_with_one_line(tmp_path, capsys, model):
    """With --model it was a traceback; without, a session saved from it could not be read."""
    sentence = b"the \xff cat".decode("utf-8", "surrogateescape")
    assert run_app(["--sentence", sentence, *model, "--screenshot", str(tmp_path / "w.png")]) == 2
    assert "--sentence is not valid UTF-8 text" in _one_line(capsys)


@pytest.mark.parametrize("n", ["0", "-5", "100000"])
def test_the_generate_windows_new_tokens_are_checked_as_generate_checks_them(tmp_path, capsys, n):
    """They were clamped to 1, 1 and 4096; generate refuses them."""
    assert generate_main(["--model", "induction", "--prompt", "ab", "--max-new-tokens", n, "--out",
                          str(tmp_path / "g")]) == 2  # fmt: skip
    line = _one_line(capsys)
    for name in ("--max-new-tokens", "--new-tokens"):  # the older name, still accepted
        argv = ["--model", "induction", "--generate", "ab", name, n, "--screenshot", str(tmp_path / "w.png")]
        assert run_app(argv) == 2
        assert _one_line(capsys) == line == f"error: --max-new-tokens must be from 1 to 4096, got {n}"
    assert not (tmp_path / "w.png").exists() and not (tmp_path / "g").exists()


def test_the_generate_window_takes_step_as_generate_does(tmp_path, monkeypatch, capsys):
    """``--step`` was ignored silently: the Generate window opened the last checkpoint."""
    import explorer.panels.generate_panel as panel

    opened = []
    monkeypatch.setattr(panel, "generate_screenshot", lambda model, prompt, n, out: opened.append((model, n)) or 0)
    assert run_app(["--model", "induction", "--step", "first", "--generate", "ab", "--screenshot", "x.png"]) == 0
    assert run_app(["--model", "induction", "--generate", "ab", "--max-new-tokens", "7", "--screenshot", "x.png"]) == 0
    (first, default_n), (last, n) = opened
    assert Path(first).name == "step-000000" and (default_n, n) == (20, 7)
    assert "checkpoints" not in last
    assert run_app(["--model", "induction", "--step", "99999", "--generate", "ab", "--screenshot", "x.png"]) == 2
    assert "has no step 99999" in _one_line(capsys)
    assert run_app(["--sentence", FIVE, "--max-new-tokens", "3"]) == 2
    assert _one_line(capsys) == "error: --max-new-tokens applies only with --generate"


def test_a_sessions_query_the_run_does_not_have_is_refused_not_dropped(tmp_path, capsys):
    path = save_session(tmp_path / "s.zip", Session(RunSpec(sentence=FIVE), stage="weights", query=99))
    assert run_app(["--session", str(path), "--screenshot", str(tmp_path / "w.png")]) == 2
    assert _one_line(capsys) == "error: the session's query 99 is outside the run's 5 queries (0..4)"
    assert not (tmp_path / "w.png").exists()
    good = save_session(tmp_path / "g.zip", Session(RunSpec(sentence=FIVE), stage="weights", query=3))
    assert run_app(["--session", str(good), "--screenshot", str(tmp_path / "w.png")]) == 0


def test_a_pinned_run_that_cannot_be_computed_is_said_not_reported_as_no_pinned_run(tmp_path, capsys):
    pinned = RunSpec(model="induction", sentence="ab", layer=7)
    path = save_session(tmp_path / "s.zip", Session(RunSpec(sentence=FIVE), pinned=pinned))
    assert run_app(["--session", str(path), "--view", "compare", "--screenshot", str(tmp_path / "w.png")]) == 2
    line = _one_line(capsys)
    assert line == ("error: the session's pinned run could not be computed: layer 7 is out of range: induction has "
                    "2 layers (0..1)")  # fmt: skip
    assert not (tmp_path / "w.png").exists()


def test_a_models_layer_past_its_last_is_refused_with_exports_line(tmp_path, capsys):
    """The window showed the last layer instead (or refused with a line of its own)."""
    options = ["--model", "induction", "--sentence", "abcab", "--layer", "5"]
    assert export_main([*options, "--out", str(tmp_path / "e")]) == 2
    line = _one_line(capsys)
    assert run_app([*options, "--screenshot", str(tmp_path / "w.png")]) == 2
    assert _one_line(capsys) == line
