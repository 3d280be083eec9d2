"""Session formats 1 and 2 (written before the RunSpec): their runs turned into RunSpecs on load.

In those formats a run is ``{"options": {"--sentence": "...", "--heads": 2, "--bias": true, ...},
"arrays": {"embeddings": "run/embeddings.npy", ...}}``: ``main.py export`` options as written on the
command line (a flag is ``true``), the file options' matrices as members. The edits sit beside the
run (``"edits"``), the Difference toggle in the view (``view.difference``); format 2 adds a pinned
run's own ``"edits"`` and ``"difference"``. The options are read by the command line's own parser,
exactly as those versions read them, so an old file opens (or is refused) as it did.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

from models.config import InputError
from models.fields import FIELDS, add_input_arguments
from models.runspec import RunSpec, array_members

ReadArrays = Callable[[RunSpec, dict[str, str]], RunSpec]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InputError(message)


def _options() -> dict[str, object]:
    """``{"--sentence": field, ...}``: the options such a run may hold (not the file options)."""
    return {f.option: f for f in FIELDS if f.stored and f.array is None}


def _argv(options: dict) -> list[str]:
    known, argv = _options(), []
    for option, value in options.items():
        f = known.get(option)
        if f is None:
            raise InputError(f"unknown option {option!r}")
        if f.flag:
            if not isinstance(value, bool):
                raise InputError(f"option {option} must be true or false, got {value!r}")
            argv += [option] if value else []
        elif isinstance(value, list | tuple):
            argv.append(f"{option}={','.join(str(v) for v in value)}")
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            argv.append(f"{option}={value}")
        else:
            raise InputError(f"option {option} has a value of the wrong kind: {value!r}")
    return argv


def legacy_spec(data, what: str, edits, difference: bool, read_arrays: ReadArrays) -> RunSpec:
    """The RunSpec of a format-1/2 run (``read_arrays(spec, {name: member})`` reads its members)."""
    if not isinstance(data, dict) or not isinstance(data.get("options", {}), dict):
        raise InputError(f"'{what}' must be an object with 'options'")
    names = array_members(data, what)
    parser = add_input_arguments(_Parser(prog="session", add_help=False))
    args = parser.parse_args(_argv(data.get("options") or {}))
    bare = RunSpec.from_args(args).with_edits(_edits(edits, f"{what}.edits"), difference)
    return read_arrays(bare, names)


def legacy_runs(doc: dict, read_arrays: ReadArrays) -> tuple[RunSpec, RunSpec | None]:
    """``(run, pinned)`` of a format-1/2 ``session.json``."""
    view = doc.get("view") or {}
    pinned = doc.get("pinned")
    if pinned is not None and not isinstance(pinned, dict):
        raise InputError("'pinned' must be an object")
    run = legacy_spec(doc.get("run"), "run", doc.get("edits"), _flag(view, "difference", "view"), read_arrays)
    if pinned is None:
        return run, None
    return run, legacy_spec(pinned, "pinned", pinned.get("edits"), _flag(pinned, "difference", "pinned"),
                            read_arrays)  # fmt: skip


def _edits(data, what: str) -> tuple:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise InputError(f"'{what}' must be a list")
    from models.engine.edits import Edit

    return tuple(Edit.from_json(e) for e in data)


def _flag(data, name: str, what: str) -> bool:
    value = data.get(name, False) if isinstance(data, dict) else False
    if not isinstance(value, bool):
        raise InputError(f"{what} {name} must be true or false, got {value!r}")
    return value
