"""The headless ``export`` command: arguments -> RunSpec -> trace -> files.

Every user error becomes one line on stderr and exit status 2, with nothing written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from models.api import trace_spec
from models.config import InputError
from models.fields import OneLineParser, check_applicable, check_text, given_options
from models.files import run_files
from models.files.export import check_target, write_trace
from models.files.run_files import load_matrix  # noqa: F401 - re-exported for callers of models.cli.export
from models.memory import OUT_OF_MEMORY, is_out_of_memory
from models.runspec import (  # noqa: F401 - the input options' code, re-exported for callers of models.cli.export
    TOY_ONLY,
    RunSpec,
    add_input_arguments,
    labels,
    positions,
)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="main.py export",
        description="Compute every stage of attention and write <stage>.npy files + manifest.json.",
    )
    add_input_arguments(p, command="export")
    p.add_argument("--session", metavar="FILE", help="compute what a saved session shows (not with input options)")
    out = p.add_argument_group("output")
    out.add_argument("--out", required=True, metavar="DIR", help="folder to create")
    out.add_argument("--all-steps", action="store_true",
                     help="with --model: steps.csv and losses.csv over every training step (docs/induction.md)")
    out.add_argument("--force", action="store_true", help="replace a previous export of this tool (never other files)")
    out.add_argument("--stages", type=labels, metavar="weights,output",
                     help="write only these stages (default: all)")  # fmt: skip
    out.add_argument("--only-heads", type=positions, metavar="0,2",
                     help="write only these heads of per-head stages, numbered from 0 (default: all)")  # fmt: skip
    out.add_argument("--rows", type=span, metavar="A:B",
                     help="write only rows A..B-1 of every stage (exact; as a slice: -3: the last three)")  # fmt: skip
    out.add_argument("--cols", type=span, metavar="C:D", help="write only keys C..D-1 of the n×n stages (exact)")
    return p


def span(text: str) -> tuple[int | None, int | None]:
    """``A:B`` as a pair, read as a slice: either end may be left out (``5:``, ``:3``), a negative
    number counts from the end (``-3:``: the last three); the stage's size is checked when it is known."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        a, b = (int(x) if x.strip() else None for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A:B (whole numbers, either may be omitted), got {text!r}") from None
    if a is not None and b is not None and (a < 0) == (b < 0) and a >= b:
        raise argparse.ArgumentTypeError(f"expected A < B, got {text!r}")
    return a, b


SPANS = ("--rows", "--cols")


def joined_spans(argv: Sequence[str]) -> list[str]:
    """``--rows -3:`` as ``--rows=-3:`` (argparse takes a value starting with a minus sign and not
    a plain number for an option, and says "expected one argument")."""
    out = list(argv)
    for i in range(len(out) - 1, 0, -1):
        if out[i - 1] in SPANS and out[i][:1] == "-" and out[i][1:2].isdigit():
            out[i - 1 : i + 1] = [f"{out[i - 1]}={out[i]}"]
    return out


def check_arguments(args: argparse.Namespace, given: dict[str, str]) -> None:
    """Refuse text that is not valid UTF-8 and options written on the command line that would be
    ignored (even at their default value: ``--model m --heads 2``); the RunSpec's validator then
    refuses the rest."""
    if getattr(args, "session", None) is not None:  # issue 9: the session holds every input
        from models.files.session import check_session_options

        check_session_options(given)
        return
    check_text(args)
    check_applicable(given, args.model is not None)


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """What the arguments ask for, validated: a session's run, or the input options (files read)."""
    if getattr(args, "session", None) is not None:
        from models.files.session import load_session

        return load_session(args.session).run
    return run_files.spec_from_args(args).validate()


def cli_error(message: str) -> int:
    print(f"error: {printable(message)}", file=sys.stderr)
    return 2


def print_notes(notices) -> None:
    """Each notice as one ``note:`` line on stderr (a command's output stays on stdout)."""
    for notice in notices:
        print(f"note: {printable(notice)}", file=sys.stderr)


USER_ERRORS = (InputError, RecursionError, MemoryError, RuntimeError)  # what refused() may say in one line


def refused(exc: BaseException) -> int | None:
    """The one way a command says no: an error the user can fix (a bad input, one nested too deeply,
    not enough memory) as one ``error:`` line, status 2; None for anything else (re-raise it)."""
    if isinstance(exc, InputError):
        return cli_error(str(exc))
    if isinstance(exc, RecursionError):
        return cli_error("input nested too deeply to read")
    if isinstance(exc, (MemoryError, RuntimeError)) and is_out_of_memory(exc):
        return cli_error(OUT_OF_MEMORY)
    return None


def printable(text: str) -> str:
    """One line, and bytes that are not UTF-8 (surrogate-escaped) shown as escapes."""
    line = " ".join(str(text).split("\n")).strip()
    return line.encode("utf-8", "backslashreplace").decode("utf-8")


def _refuse_ignored(given: dict[str, str], dests: Sequence[str], mode: str, what: str) -> None:
    """Options written on the command line that ``mode`` would ignore, refused (never dropped)."""
    ignored = [given[d] for d in dests if d in given]
    if ignored:
        raise InputError(f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply with {mode} ({what})")


def export_main(argv: Sequence[str]) -> int:
    argv = joined_spans(argv)
    args = build_parser().parse_args(argv)
    try:
        given = given_options(build_parser(), argv)
        check_arguments(args, given)
        check_target(args.out, args.force)  # fail before computing anything
        if getattr(args, "all_steps", False):
            from models.files.steps_export import export_all_steps

            _refuse_ignored(given, ("stages", "only_heads", "rows", "cols"), "--all-steps",
                            "it writes steps.csv and losses.csv over every step")  # fmt: skip
            return export_all_steps(args)
        if args.all_layers:
            from models.cli.survey import export_all_layers

            _refuse_ignored(given, ("stages", "only_heads", "layer", "rows", "cols"), "--all-layers",
                            "it writes every layer's weights, rollout and heads.csv")  # issue 36, 50; fmt: skip
            return export_all_layers(args)
        spec = spec_from_args(args)
        notes = spec.notes()
        trace = trace_spec(spec).raw  # the trace models.api gives (api.toy, Model.trace)
        heads = list(dict.fromkeys(args.only_heads)) if args.only_heads else None
        out = write_trace(trace, args.out, force=args.force, stages=args.stages, heads=heads, rows=args.rows,
                          cols=args.cols)  # fmt: skip
    except USER_ERRORS as exc:
        if (code := refused(exc)) is None:
            raise
        return code
    print_notes(notes + list(trace.meta.get("notices", [])))
    written = len(args.stages or trace.stages)
    print(printable(f"wrote {written} stages to {out} ({trace.device}, {trace.elapsed_ms:.1f} ms)"))
    return 0
