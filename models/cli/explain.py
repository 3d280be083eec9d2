"""The headless ``explain`` command: the same inputs as ``export``, then one cell's derivation.

``python main.py explain --stage scores --cell 0,2,1 --sentence "The cat sat." [--json]``
prints how that cell is computed (text, or one JSON object with ``--json``). Every user error is
one ``error:`` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from models.cli.export import USER_ERRORS, check_arguments, print_notes, refused
from models.files.run_files import spec_from_args
from models.runspec import RunSpec, add_input_arguments, check_command, given_options


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one ``error:`` line (and exit 2) like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


def _cell(text: str) -> tuple[int, ...]:
    try:
        cell = tuple(int(p) for p in text.replace(" ", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 0,2,1, got {text!r}") from None
    return cell


def build_explain_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(
        prog="main.py explain",
        description="Explain one cell of one stage: its formula with the real numbers, and every summand.",
    )
    what = p.add_argument_group("cell")
    what.add_argument("--stage", required=True, help="a stage name, e.g. q, scores, weights, output")
    what.add_argument("--cell", required=True, type=_cell, metavar="H,I,J",
                      help="0-based index into <stage>.npy: head,row,col per head, else row,col")  # fmt: skip
    what.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_input_arguments(p, command="explain")
    return p


def derive(spec: RunSpec, stage: str, cell: tuple[int, ...]):
    """Compute the trace ``spec`` describes and the derivation of ``cell`` (models.api's
    ``Trace.explain`` is this derivation as a dict)."""
    from models.api import trace_spec

    trace = trace_spec(spec)
    return trace.raw, trace.derivation(stage, cell)


def explain_main(argv: Sequence[str]) -> int:
    args = build_explain_parser().parse_args(argv)
    try:
        given = given_options(build_explain_parser(), argv)
        check_command(args, "explain")  # --all-layers: export's only
        check_arguments(args, given)  # the very checks export makes
        spec = spec_from_args(args).validate()
        notes = spec.notes()
        trace, derivation = derive(spec, args.stage, args.cell)
    except USER_ERRORS as exc:
        if (code := refused(exc)) is None:
            raise
        return code
    print_notes(notes + list(trace.meta.get("notices", [])))
    print(derivation.to_json() if args.json else derivation.text(), end="\n" if args.json else "")
    return 0
