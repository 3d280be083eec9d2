"""Session files: one ``.zip`` holding everything needed to reopen a view, readable without this tool.

Members:

- ``session.json``: ``{"format": "attention-explorer-session", "version": 1, "run": RUN,
  "view": {"stage": "weights", "head": -1, "query": -1, "difference": false}, "edits": [EDIT, ...],
  "pinned": RUN | null}``
  where ``RUN = {"options": {"--sentence": "...", "--heads": 2, "--bias": true, ...}, "arrays":
  {"embeddings": "run/embeddings.npy", ...}}``. Options are ``main.py export`` options as written on
  the command line (a flag is ``true``); file options (``--embeddings``, ``--cross-embeddings``,
  ``--mask-file``, ``--weights``) are members instead. ``head`` and ``query`` are 0-based, -1 = all
  heads / no query. An edit is ``{"stage": "q", "cell": [head, row, col], "value": 5.0}`` (models/edits.py).
  ``difference``: the window shows edited − original (optional, false when absent).
  ``"atlas": {"corpus": PATH, "sha256": HEX}`` (optional, any version): the corpus of the head atlas
  the window showed, so that reopening can say whether the file is still the same.
- Version 2 adds, to the pinned run only, ``"edits": [EDIT, ...]`` and ``"difference": true`` (a
  pinned run that was edited, or shown as a difference); a file is written as version 2 only when
  its pinned run has either, so every other file still opens in version 1 readers.
- ``.npy`` members, read with ``allow_pickle=False``: ``embeddings``, ``cross_embeddings``, ``mask``
  (bool, True = hidden) and ``weights/<name>`` (``W_q`` …, as in a weights ``.npz``).

A session is checked as the command line checks the same options (the very same code), so a bad
one is refused with one line: a newer version, a corrupt or truncated file, a missing member, a
wrong shape, a model that is not here.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from .atomic import atomic_file
from .config import DEFAULT_MAX_TOKENS, AttentionRequest, InputError
from .edits import Edit
from .io import SafeZip

FORMAT = "attention-explorer-session"
VERSION = 2  # the newest format read; files are written with the oldest that holds them
JSON_MEMBER = "session.json"
FILE_OPTIONS = {"embeddings": "embeddings", "cross_embeddings": "cross_embeddings", "mask_file": "mask"}
NOT_STORED = ("all_layers",)  # an export mode, not an input
_MAX_JSON_BYTES = 64 << 20


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InputError(message)


def _input_parser() -> argparse.ArgumentParser:
    from .runspec import add_input_arguments

    return add_input_arguments(_Parser(prog="session", add_help=False))


def _option_names() -> dict[str, argparse.Action]:
    """``{"--sentence": action, ...}``: the options a session may hold."""
    skip = set(FILE_OPTIONS) | {"weights", *NOT_STORED}
    return {a.option_strings[-1]: a for a in _input_parser()._actions if a.option_strings and a.dest not in skip}


@dataclass(frozen=True, eq=False)
class Run:
    """One computation: command-line options plus the matrices its files held."""

    options: dict[str, Any] = field(default_factory=dict)  # {"--sentence": "…", "--heads": 2, "--bias": True}
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # embeddings, cross_embeddings, mask, weights/W_q

    def argv(self) -> list[str]:
        """The options as a command line (without the file options)."""
        known = _option_names()
        argv = []
        for option, value in self.options.items():
            action = known.get(option)
            if action is None:
                raise InputError(f"unknown option {option!r}")
            if isinstance(action, argparse._StoreTrueAction):
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

    def parsed(self) -> argparse.Namespace:
        """The options as ``main.py export`` reads them, every default filled in (no files)."""
        args = _input_parser().parse_args(self.argv())
        args.all_layers = False
        return args

    @contextmanager
    def namespace(self) -> Iterator[argparse.Namespace]:
        """The ``argparse`` namespace ``main.py export`` would have for this run, its matrices in
        temporary files (removed at the end of the block)."""
        args = self.parsed()
        with tempfile.TemporaryDirectory(prefix="attention-session-") as folder:
            for dest, name in FILE_OPTIONS.items():
                if name in self.arrays:
                    path = os.path.join(folder, f"{name}.npy")
                    np.save(path, self.arrays[name], allow_pickle=False)
                    setattr(args, dest, path)
            weights = {k.removeprefix("weights/"): a for k, a in self.arrays.items() if k.startswith("weights/")}
            if weights:
                args.weights = os.path.join(folder, "weights.npz")
                np.savez(args.weights, **weights)
            yield args

    def given(self) -> dict[str, str]:
        """``{dest: "--option"}`` of what this run sets, as models.cli.check_arguments takes it."""
        known = _option_names()
        given = {known[o].dest: o for o in self.options if o in known}
        given |= {dest: "--" + dest.replace("_", "-") for dest, name in FILE_OPTIONS.items() if name in self.arrays}
        if any(k.startswith("weights/") for k in self.arrays):
            given["weights"] = "--weights"
        return given

    @property
    def model(self) -> str | None:
        return self.options.get("--model")

    def request(self) -> AttentionRequest:
        """The toy engine's request, built by the command line's own code."""
        from .runspec import request_from_args

        if self.model is not None:
            raise InputError("this session traces a pretrained model, not the toy engine")
        with self.namespace() as args:
            return request_from_args(args)

    def trace(self, edits=()):
        """The trace ``main.py export`` computes for these options, with ``edits`` applied."""
        from .runspec import input_trace

        if self.model is None:
            from .edits import apply_edits

            return apply_edits(self.request(), edits)
        if edits:
            from .runspec import model_from_args, model_trace_from_args

            with self.namespace() as args:
                return model_trace_from_args(model_from_args(args), args, edits=edits)
        with self.namespace() as args:
            return input_trace(args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Run:
        """A run from ``main.py export`` arguments (its files read now)."""
        from .runspec import load_matrix

        options = {}
        for option, action in _option_names().items():
            value = getattr(args, action.dest, None)
            if value is not None and value != action.default:
                options[option] = list(value) if isinstance(value, tuple) else value
        arrays = {name: load_matrix(getattr(args, dest), dest) for dest, name in FILE_OPTIONS.items()
                  if getattr(args, dest, None)}  # fmt: skip
        if getattr(args, "weights", None):
            from .weights import read_weights_file

            arrays |= {f"weights/{k}": a for k, a in read_weights_file(args.weights).items()}
        return cls(options, arrays)


@dataclass(frozen=True, eq=False)
class Session:
    run: Run
    stage: str | None = None
    head: int = -1  # 0-based; -1: all heads
    query: int = -1  # 0-based; -1: none focused
    edits: tuple[Edit, ...] = ()
    pinned: Run | None = None  # the run shown beside this one for comparison
    difference: bool = False  # the window shows edited − original
    pinned_edits: tuple[Edit, ...] = ()  # the pinned run's own edits (format 2)
    pinned_difference: bool = False  # the pinned run was shown as edited − original (format 2)
    # The head atlas's corpus (issue 22), {"corpus": path, "sha256": hex}; optional, any version.
    atlas: dict | None = None

    def request(self) -> AttentionRequest:
        return self.run.request()

    def trace(self):
        return self.run.trace(self.edits)


# --- writing ------------------------------------------------------------------------------------


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return buf.getvalue()


def _run_json(run: Run, prefix: str, members: dict[str, bytes]) -> dict:
    names = {}
    for key, array in run.arrays.items():
        names[key] = f"{prefix}/{key}.npy"
        members[names[key]] = _npy(array)
    return {"options": dict(run.options), "arrays": names}


def save_session(path: str | os.PathLike, session: Session) -> Path:
    """Write ``session`` to ``path`` atomically: a temporary file beside it, renamed into place."""
    path = Path(path)
    members: dict[str, bytes] = {}
    pinned = None if session.pinned is None else _run_json(session.pinned, "pinned", members)
    if pinned is not None and (session.pinned_edits or session.pinned_difference):
        pinned |= {"edits": [e.to_json() for e in session.pinned_edits], "difference": session.pinned_difference}
    doc = {
        "format": FORMAT,
        "version": 2 if pinned is not None and "edits" in pinned else 1,
        "run": _run_json(session.run, "run", members),
        "view": {"stage": session.stage, "head": session.head, "query": session.query,
                 "difference": session.difference},  # fmt: skip
        "edits": [e.to_json() for e in session.edits],
        "pinned": pinned,
    }
    if session.atlas is not None:
        doc["atlas"] = dict(session.atlas)
    text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    with atomic_file(path, "session") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(JSON_MEMBER, text.encode("utf-8", "backslashreplace"))
        for name, data in members.items():
            zf.writestr(name, data)
    return path


# --- reading ------------------------------------------------------------------------------------


def load_session(path: str | os.PathLike) -> Session:
    """Read and check a session file; one-line :class:`InputError` for anything wrong."""
    try:
        return _load(Path(path))
    except InputError as exc:
        raise InputError(f"session {path}: {exc}") from None
    except RecursionError:
        raise InputError(f"session {path}: nested too deeply to read") from None


def _load(path: Path) -> Session:
    from .io import check_regular, open_regular

    check_regular(path, "")  # a FIFO or a device: refused at once, never waited on
    with open_regular(path, "") as f, SafeZip(f, "", "session file") as zf:
        doc = _read_json(zf)
        run = _read_run(zf, doc.get("run"), "run", _max_tokens(doc.get("run")))
        pinned = None if doc.get("pinned") is None else _read_run(zf, doc["pinned"], "pinned",
                                                                  _max_tokens(doc["pinned"]))  # fmt: skip
    view = doc.get("view") or {}
    if not isinstance(view, dict):
        raise InputError("'view' must be an object")
    stage, head, query = view.get("stage"), view.get("head", -1), view.get("query", -1)
    if stage is not None and not isinstance(stage, str):
        raise InputError(f"view stage must be a stage name, got {stage!r}")
    for name, value in (("head", head), ("query", query)):
        if type(value) is not int or value < -1:
            raise InputError(f"view {name} must be an integer ≥ -1, got {value!r}")
    difference = _flag(view, "difference", "view")
    pinned_doc = doc.get("pinned") or {}
    if not isinstance(pinned_doc, dict):
        raise InputError("'pinned' must be an object")
    pinned_edits = _edits(pinned_doc.get("edits"), "pinned.edits")
    session = Session(run, stage, head, query, _edits(doc.get("edits"), "edits"), pinned, difference,
                      pinned_edits, _flag(pinned_doc, "difference", "pinned"),
                      _atlas(doc.get("atlas")))  # fmt: skip
    check_session(session)
    return session


def _atlas(data) -> dict | None:
    """The optional ``"atlas": {"corpus": path, "sha256": 64 hex digits}``."""
    if data is None:
        return None
    sha = data.get("sha256") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("corpus"), str) or not isinstance(sha, str) \
            or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):  # fmt: skip
        raise InputError("'atlas' must be {\"corpus\": a path, \"sha256\": 64 hex digits}")
    return {"corpus": data["corpus"], "sha256": sha}


def _edits(data, what: str) -> tuple[Edit, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise InputError(f"'{what}' must be a list")
    return tuple(Edit.from_json(e) for e in data)


def _flag(data: dict, name: str, what: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise InputError(f"{what} {name} must be true or false, got {value!r}")
    return value


def _read_json(zf: SafeZip) -> dict:
    from .io import parse_json

    if JSON_MEMBER not in zf.names:
        raise InputError(f"no {JSON_MEMBER} inside: not a session file")
    doc = parse_json(zf.read(JSON_MEMBER, _MAX_JSON_BYTES), JSON_MEMBER)
    if doc.get("format") != FORMAT:
        raise InputError(f"{JSON_MEMBER} is not an {FORMAT} document")
    version = doc.get("version")
    if type(version) is not int or version < 1:
        raise InputError(f"unknown format version {version!r}")
    if version > VERSION:
        raise InputError(f"written by a newer version (format {version}); this one reads format {VERSION}")
    return doc


def _max_tokens(data) -> int:
    """The run's ``--max-tokens`` (what bounds its matrices' rows), read before its arrays."""
    options = data.get("options") if isinstance(data, dict) else None
    value = options.get("--max-tokens") if isinstance(options, dict) else None
    return value if type(value) is int and 0 < value <= 1 << 31 else DEFAULT_MAX_TOKENS


def _weight_shapes(data) -> dict[str, tuple[int, ...]] | None:
    """The shapes a toy run's weights must have (from its options), or None when unknown."""
    from .config import AttentionConfig
    from .weights import expected_shapes

    try:
        options = data.get("options") or {}
        if not isinstance(options, dict) or "--model" in options:
            return None
        args = Run(dict(options)).parsed()
        cfg = AttentionConfig(heads=args.heads, d_model=args.d_model, d_k=args.d_k, d_v=args.d_v, d_out=args.d_out)
        return expected_shapes(cfg.validate())
    except (InputError, AttributeError, TypeError, ValueError):
        return None  # refused, with its reason, when the run itself is checked


def _shape_check(key: str, member: str, max_tokens: int, weights: dict | None = None):
    """Refuse, from the ``.npy`` header, a matrix with more rows (or mask columns) than tokens,
    or a weight of another shape than the run's sizes give: before its data is decompressed."""

    def check(shape: tuple[int, ...]) -> None:
        if key.startswith("weights/"):
            expected = (weights or {}).get(key.removeprefix("weights/"))
            if expected is not None and shape not in (expected, expected[1:] if expected[0] == 1 else expected):
                raise InputError(f"member {member} has shape {shape}, expected {expected} for the run's sizes")
            return
        if len(shape) != 2:
            raise InputError(f"member {member} has shape {shape}; expected a matrix (2 axes)")
        rows = shape if key == "mask" else shape[:1]
        if max(rows) > max_tokens:
            raise InputError(f"member {member} has shape {shape}, more than the limit of {max_tokens} tokens")

    return check


def _read_run(zf: SafeZip, data, what: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> Run:
    if not isinstance(data, dict) or not isinstance(data.get("options", {}), dict):
        raise InputError(f"'{what}' must be an object with 'options'")
    names = data.get("arrays") or {}
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        raise InputError(f"'{what}.arrays' must map names to members")
    allowed = set(FILE_OPTIONS.values())
    weights = _weight_shapes(data) if any(k.startswith("weights/") for k in names) else None
    arrays = {}
    for key, member in names.items():
        if key not in allowed and not key.startswith("weights/"):
            raise InputError(f"unknown array {key!r} in {what}")
        arrays[key] = zf.array(member, _shape_check(key, member, max_tokens, weights))
    return Run(dict(data.get("options", {})), arrays)


def check_session(session: Session) -> None:
    """Check each run as ``main.py export`` checks its options, and the edits against the trace."""
    runs = [(session.run, session.edits)] + ([(session.pinned, session.pinned_edits)] if session.pinned else [])
    for run, edits in runs:
        trace = check_run(run)
        if not edits:
            continue
        if trace is None:  # a model's layer: its shapes are known once it is traced
            from .pretrained.edits import check_form

            check_form(edits)
            continue
        from .edits import check_edit, edit_shapes

        shapes = edit_shapes(trace)
        for e in edits:
            check_edit(e, shapes)


def check_session_options(given: dict[str, str]) -> list[str]:
    """``export --session``: refuse input options beside it (the session holds the inputs)."""
    output = {"session", "out", "force", "stages", "only_heads"}
    extra = [option for dest, option in given.items() if dest not in output]
    if extra:
        raise InputError(f"--session holds the inputs; remove {', '.join(extra)}")
    return []


def check_run(run: Run):
    """Refuse what ``main.py export`` would refuse for these options; the toy trace (cheap: the
    n×n stages are lazy) for a toy run, None for a model (resolved, not loaded)."""
    from .runspec import check_arguments

    with run.namespace() as args:
        check_arguments(args, run.given())
    if run.model is not None:
        from .pretrained import resolve_model

        resolve_model(run.model)
        return None
    from .pipeline import run as run_pipeline

    return run_pipeline(run.request())
