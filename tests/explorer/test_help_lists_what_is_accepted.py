"""A command's --help lists what it accepts (issue 44, item 20), derived from the one option table.

Before: ``why --help`` and ``explain --help`` listed ``--all-layers`` (refused), the window's listed
``--device``, ``--max-tokens`` and ``--all-layers`` (refused), every help offered ``--mask custom``
without saying that a model refuses it, and ``atlas --help`` said ``--no-detectors`` leaves "NaN"
where the file has empty cells. Each row of models/fields.py says which commands take it
(``Field.commands``); a row another command does not take is not listed there and, given, is refused
by name (``check_command``)."""

from __future__ import annotations

import re

import pytest

from explorer.command_line import build_parser as window_parser
from main import main
from models.cli.atlas import build_atlas_parser
from models.cli.explain import build_explain_parser
from models.cli.export import build_parser as export_parser
from models.cli.why import build_why_parser
from models.fields import FIELDS

PARSERS = {"export": export_parser, "explain": build_explain_parser, "why": build_why_parser,
           "window": window_parser}  # fmt: skip


def listed(help_text: str, option: str) -> bool:
    """``option`` in the usage line or starting a line of the options (not named in another's help)."""
    return re.search(rf"(^\s+|\[){re.escape(option)}(?![\w-])", help_text, re.MULTILINE) is not None


@pytest.mark.parametrize("command", PARSERS)
def test_each_help_lists_exactly_the_rows_its_command_takes(command):
    text = PARSERS[command]().format_help()
    for f in FIELDS:
        takes = f.commands is None or command in f.commands
        assert listed(text, f.option) == takes, (command, f.option)
        if f.toy_choices and takes:
            assert all(f"{c}: the toy only, not with --model" in " ".join(text.split()) for c in f.toy_choices)


@pytest.mark.parametrize("command", PARSERS)
def test_a_row_the_help_leaves_out_is_refused_by_name(capsys, tmp_path, command):
    for f in FIELDS:
        if f.commands is None or command in f.commands:
            continue
        value = [] if f.flag else [str(f.choices[-1] if f.choices else 7)]
        argv = ["--sentence", "a b", f.option, *value]
        argv = {"export": ["export", *argv, "--out", str(tmp_path / "o")],
                "explain": ["explain", *argv, "--stage", "weights", "--cell", "0,0,0"],
                "why": ["why", *argv, "--cell", "0,0,0"],
                "window": [*argv, "--screenshot", str(tmp_path / "s.png")]}[command]  # fmt: skip
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {f.option} applies to 'main.py ") and \
            err[0].endswith(" only"), err  # fmt: skip


def test_atlas_help_says_what_the_file_holds():
    text = " ".join(build_atlas_parser().format_help().split())
    assert "NaN" not in text and "empty cells in heads.csv" in text
