"""``export --rows/--cols`` (issue 50, item 7): a region outside the stage is one ``error:`` line
naming the valid range (it was clipped: ``--rows 9:10`` of 9 tokens wrote 0-row arrays, exit 0);
``--rows`` with ``--all-layers`` or ``--all-steps`` is refused (it was ignored); export's usage
mistakes are one line like why's and the window's (a 16-line usage block, no ``error:`` line);
a negative range reads as a slice (``--rows -3:`` said "expected one argument")."""

from __future__ import annotations

import numpy as np
import pytest

from models.cli.export import export_main
from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine.pipeline import run
from models.files.export import write_trace

NINE = ["--sentence", "a b c d e f g h i", "--heads", "2", "--d-model", "8"]


def _one_line(capsys, rc: int) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (rc, captured.err)
    return lines[0]


@pytest.mark.parametrize("option, words", [
    (["--rows", "9:10"], "--rows 9:10 is outside the 9 rows"),
    (["--cols", "0:100"], "--cols 0:100 is outside the 9 keys"),
    (["--rows", "-10:"], "--rows -10: is outside the 9 rows"),
])  # fmt: skip
def test_a_region_outside_the_stage_is_refused_naming_the_valid_range(tmp_path, capsys, option, words):
    line = _one_line(capsys, export_main([*NINE, *option, "--out", str(tmp_path / "out")]))
    assert words in line, line
    assert "0 ≤ A < B ≤ 9" in line
    assert not (tmp_path / "out").exists()


def test_the_api_refuses_it_too(tmp_path):
    trace = run(AttentionRequest(config=AttentionConfig(heads=2, d_model=8), sentence="a b c"))
    with pytest.raises(InputError, match=r"0 ≤ A < B ≤ 3"):
        write_trace(trace, tmp_path / "out", rows=(3, 4))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["--rows", "-3:"], ["--rows=-3:"], ["--rows", "6:"], ["--rows", "-3:9"]])
def test_a_negative_or_open_range_reads_as_a_slice(tmp_path, capsys, argv):
    full, part = tmp_path / "full", tmp_path / "part"
    assert export_main([*NINE, "--stages", "weights,q", "--out", str(full)]) == 0
    assert export_main([*NINE, "--stages", "weights,q", *argv, "--cols", ":-1", "--out", str(part)]) == 0, (
        capsys.readouterr().err)  # fmt: skip
    weights = np.load(full / "weights.npy")
    np.testing.assert_array_equal(np.load(part / "weights.npy"), weights[:, 6:, :8])
    np.testing.assert_array_equal(np.load(part / "q.npy"), np.load(full / "q.npy")[:, 6:])  # q has no keys


@pytest.mark.parametrize("mode", [["--all-layers"], ["--all-steps"]])
@pytest.mark.parametrize("option", [["--rows", "0:2"], ["--cols", "1:"]])
def test_rows_and_cols_are_refused_where_they_would_be_ignored(tmp_path, capsys, mode, option):
    argv = ["--model", "induction", "--sentence", "a b c d", *mode, *option, "--out", str(tmp_path / "o")]
    line = _one_line(capsys, export_main(argv))
    assert f"{option[0]} does not apply with {mode[0]}" in line and not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, words", [
    ([*NINE, "--bogus", "--out", "x"], "unrecognized arguments: --bogus"),
    (NINE, "the following arguments are required: --out"),
    ([*NINE, "--rows", "1:x", "--out", "x"], "argument --rows: expected A:B"),
    ([*NINE, "--rows", "3:3", "--out", "x"], "argument --rows: expected A < B"),
    ([*NINE, "--heads", "two", "--out", "x"], "argument --heads"),
])  # fmt: skip
def test_exports_usage_mistakes_are_one_line(capsys, argv, words):
    with pytest.raises(SystemExit) as done:
        export_main(argv)
    assert words in _one_line(capsys, done.value.code)


def test_an_export_too_large_for_the_disk_says_how_many_rows_fit(tmp_path, monkeypatch):
    """Issue 50, item 11: refused for its size with --rows given, the line said "use --rows A:B", not which."""
    import shutil
    from collections import namedtuple

    from models.api import toy
    from models.config import InputError
    from models.files.export import check_size

    shown = toy(" ".join(f"w{i}" for i in range(40)), mask="causal")
    trace, stages = shown.raw, [name for name in shown.stages if name in ("scores", "masked", "weights")]
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(1 << 40, 0, 20_000))
    with pytest.raises(InputError, match=r"of these 30 rows would fit \(e\.g\. --rows 10:(\d+)\)") as err:
        check_size(trace, stages, tmp_path / "out", None, rows=(10, 40), cols=None)
    fit = int(str(err.value).split("--rows 10:")[1].split(")")[0])
    check_size(trace, stages, tmp_path / "out", None, rows=(10, fit), cols=None)  # the advice holds
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(1 << 40, 0, 10))
    with pytest.raises(InputError, match="not even one row"):
        check_size(trace, stages, tmp_path / "out", None, rows=(10, 40), cols=None)
