"""The headless ``why`` command: explain's inputs, then one score split into its sources.

``python main.py why --cell H,I,J --sentence "The cat sat." [--json] [--row]`` prints the score of head
H at query I and key J (the ``scaled`` stage), its largest query-source × key-source terms and the
row and column totals (:mod:`models.reads.why`); ``--json`` prints ``score``, ``query_sources``,
``key_sources`` and ``table`` (rows: query sources, columns: key sources) and more. Every user error
is one ``error:`` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import NoReturn

from models.cli.export import USER_ERRORS, check_arguments, print_notes, refused
from models.config import InputError
from models.files.run_files import spec_from_args
from models.runspec import add_input_arguments, check_command, given_options


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one ``error:`` line (and exit 2), as explain's."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


def _cell(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.replace(" ", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 0,2,1, got {text!r}") from None


def build_why_parser() -> _OneLineParser:
    p = _OneLineParser(
        prog="main.py why",
        description="Why does this head attend here? Split one score into query-source × key-source terms.",
    )
    what = p.add_argument_group("cell")
    what.add_argument("--cell", required=True, type=_cell, metavar="H,I,J",
                      help="0-based query head, query row and key column of the score")  # fmt: skip
    what.add_argument("--row", action="store_true",
                      help="also split the row: the top key's terms minus the weighted mean over keys")  # fmt: skip
    what.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    what.add_argument("--steps", metavar="STEPS",
                      help="with --model: the split at every training checkpoint ('all') or at some "
                           "('first,583,last'), as a series (docs/time-machine.md)")  # fmt: skip
    add_input_arguments(p, command="why")
    return p


def why_main(argv: Sequence[str]) -> int:
    from models.reads.why import text, to_json, why

    args = build_why_parser().parse_args(argv)
    try:
        given = given_options(build_why_parser(), argv)
        check_command(args, "why")  # --all-layers: export's only
        if len(args.cell) != 3:
            raise InputError(f"--cell takes head,row,col (3 numbers), got {len(args.cell)}")
        check_arguments(args, given)  # the very checks export and explain make
        spec = spec_from_args(args).validate()
        notes = spec.notes()
        if args.steps is not None:
            from models.history import why_steps

            if args.row:
                raise InputError("--row splits one step's row; drop it with --steps")
            over = why_steps.why_over_steps(spec, *args.cell, steps=args.steps)
        else:
            result = why(spec, *args.cell, with_row=args.row)
    except USER_ERRORS as exc:
        if (code := refused(exc)) is None:
            raise
        return code
    print_notes(notes)
    if args.steps is not None:
        print(json.dumps(over, indent=1) if args.json else why_steps.text(over), end="\n" if args.json else "")
        return 0
    print(to_json(result) if args.json else text(result, result.get("row_split")), end="\n" if args.json else "")
    return 0
