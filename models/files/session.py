"""Session files: one ``.zip`` holding everything needed to reopen a view, readable without this tool.

Members (format 3):

- ``session.json``: ``{"format": "attention-explorer-session", "version": 3, "run": RUNSPEC,
  "view": {"stage": "weights", "head": -1, "query": -1}, "pinned": RUNSPEC | null}``
  where ``RUNSPEC`` is a :class:`~models.runspec.RunSpec`'s JSON: ``{"runspec": 1, "options":
  {"sentence": "...", "heads": 2, "bias": true, ...}, "arrays": {"embeddings": "run/embeddings.npy", ...},
  "edits": [EDIT, ...], "difference": false}``. Options are named as the fields of the one option
  table (models/fields.py: the command line's ``--d-model`` is ``d_model``); only those that differ
  from the default are written. ``head`` and ``query`` are 0-based, -1 = all heads / no query. An
  edit is ``{"stage": "q", "cell": [head, row, col], "value": 5.0}`` (models/engine/edits.py);
  ``difference``: the run is shown as edited − original.
  ``"atlas": {"corpus": PATH, "sha256": HEX}`` (optional, any version): the corpus of the head atlas
  the window showed, so that reopening can say whether the file is still the same.
- ``.npy`` members, read with ``allow_pickle=False``: ``embeddings``, ``cross_embeddings``, ``mask``
  (bool, True = hidden) and ``weights/<name>`` (``W_q`` …, as in a weights ``.npz``).

Formats 1 and 2 (the runs as command-line option strings) still open: models/files/session_legacy.py
turns them into RunSpecs. A session is checked by the one validator (``RunSpec.validate``, what the
command line runs), so a bad one is refused with one line: a newer version, a corrupt or truncated
file, a missing member, a wrong shape, a model that is not here.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.config import DEFAULT_MAX_TOKENS, InputError
from models.engine.held_arrays import HeldArrays
from models.io import SafeZip
from models.io.atomic import atomic_file
from models.runspec import RunSpec, array_members

FORMAT = "attention-explorer-session"
VERSION = 3  # the newest format read, and the one written
JSON_MEMBER = "session.json"
_MAX_JSON_BYTES = 64 << 20


@dataclass(frozen=True, eq=False)
class Session:
    run: RunSpec  # what is shown: its edits and Difference flag inside
    stage: str | None = None
    head: int = -1  # 0-based; -1: all heads
    query: int = -1  # 0-based; -1: none focused
    pinned: RunSpec | None = None  # the run shown beside this one for comparison
    # The head atlas's corpus (issue 22), {"corpus": path, "sha256": hex}; optional, any version.
    atlas: dict | None = None

    def trace(self):
        """What ``export --session`` writes: the run's trace, its edits applied."""
        from models.run_engine import trace

        return trace(self.run)


# --- writing ------------------------------------------------------------------------------------


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return buf.getvalue()


def _spec_json(spec: RunSpec, prefix: str, members: dict[str, bytes]) -> dict:
    doc = spec.to_json(prefix)
    for name, member in doc["arrays"].items():
        members[member] = _npy(spec.arrays[name])
    return doc


def save_session(path: str | os.PathLike, session: Session) -> Path:
    """Write ``session`` to ``path`` atomically: a temporary file beside it, renamed into place."""
    path = Path(path)
    members: dict[str, bytes] = {}
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "run": _spec_json(session.run, "run/", members),
        "view": {"stage": session.stage, "head": session.head, "query": session.query},
        "pinned": None if session.pinned is None else _spec_json(session.pinned, "pinned/", members),
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
    from models.io import check_regular, open_regular

    check_regular(path, "")  # a FIFO or a device: refused at once, never waited on
    with open_regular(path, "") as f, SafeZip(f, "", "session file") as zf:
        doc = _read_json(zf)
        if doc["version"] < 3:
            from models.files.session_legacy import legacy_runs

            run, pinned = legacy_runs(doc, lambda spec, names: read_arrays(zf, spec, names))
        else:
            run = _read_spec(zf, doc.get("run"), "run")
            pinned = None if doc.get("pinned") is None else _read_spec(zf, doc["pinned"], "pinned")
    view = doc.get("view") or {}
    if not isinstance(view, dict):
        raise InputError("'view' must be an object")
    stage, head, query = view.get("stage"), view.get("head", -1), view.get("query", -1)
    if stage is not None and not isinstance(stage, str):
        raise InputError(f"view stage must be a stage name, got {stage!r}")
    for name, value in (("head", head), ("query", query)):
        if type(value) is not int or value < -1:
            raise InputError(f"view {name} must be an integer ≥ -1, got {value!r}")
    session = Session(run, stage, head, query, pinned, _atlas(doc.get("atlas")))
    check_session(session)
    return session


def _read_spec(zf: SafeZip, data, what: str) -> RunSpec:
    """A RunSpec from its JSON, its arrays read from their members (shapes checked first)."""
    bare = RunSpec.from_json(data, None, what)
    return read_arrays(zf, bare, array_members(data, what))


def read_arrays(zf: SafeZip, spec: RunSpec, names: dict[str, str]) -> RunSpec:
    """``spec`` with the arrays of ``names`` (``{name: member}``), each refused from its ``.npy``
    header when its shape cannot belong to ``spec`` (before its data is decompressed)."""
    weights = _weight_shapes(spec) if any(k.startswith("weights/") for k in names) else None
    max_tokens = spec.max_tokens if type(spec.max_tokens) is int and 0 < spec.max_tokens <= 1 << 31 \
        else DEFAULT_MAX_TOKENS  # fmt: skip
    width = spec.d_model if not spec.uses_model and type(spec.d_model) is int else None
    arrays = {key: zf.array(member, _shape_check(key, member, max_tokens, weights, width))
              for key, member in names.items()}  # fmt: skip
    for array in arrays.values():  # handed over: HeldArrays keeps them without a copy
        array.flags.writeable = False
    return spec.replace(arrays=HeldArrays(arrays))


def _atlas(data) -> dict | None:
    """The optional ``"atlas": {"corpus": path, "sha256": 64 hex digits}``."""
    if data is None:
        return None
    sha = data.get("sha256") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("corpus"), str) or not isinstance(sha, str) \
            or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):  # fmt: skip
        raise InputError("'atlas' must be {\"corpus\": a path, \"sha256\": 64 hex digits}")
    return {"corpus": data["corpus"], "sha256": sha}


def _read_json(zf: SafeZip) -> dict:
    from models.io import parse_json

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


def _weight_shapes(spec: RunSpec) -> dict[str, tuple[int, ...]] | None:
    """The shapes a toy run's weights must have (from its sizes), or None when unknown."""
    from models.engine.weights import expected_shapes

    if spec.uses_model:
        return None
    try:
        return expected_shapes(spec.config().validate())
    except (InputError, AttributeError, TypeError, ValueError):
        return None  # refused, with its reason, when the run itself is checked


def _shape_check(key: str, member: str, max_tokens: int, weights: dict | None = None, d_model: int | None = None):
    """Refuse, from the ``.npy`` header, a matrix with more rows (or mask columns) than tokens, embeddings
    of another width than the run's ``d_model``, one larger than the memory left, or a weight of another
    shape than the run's sizes give: before its data is decompressed."""
    from models.io.matrix_header import wide_hint
    from models.memory import F32, check_memory

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
        if key != "mask" and d_model is not None and shape[1] != d_model:
            name = "query embeddings" if key == "cross_embeddings" else "embeddings"  # the engine's words
            raise InputError(f"{name} has {shape[1]} columns but d_model is {d_model} (member {member})")
        # its data, its float32 copy and the embedding lookups (models/io/matrix_header.py)
        check_memory(shape[0] * shape[1] * (8 + 2 * F32), f"member {member} (shape {shape})", hint=wide_hint(shape))

    return check


def check_session(session: Session) -> None:
    """Check each run with the one validator (what ``main.py export`` runs): its options, arrays and edits."""
    for spec in (session.run, session.pinned):
        if spec is not None:
            spec.validate().resolve()  # the model found on disk: the file is being read anyway


def check_session_options(given: dict[str, str]) -> list[str]:
    """``export --session``: refuse input options beside it (the session holds the inputs)."""
    output = {"session", "out", "force", "stages", "only_heads"}
    extra = [option for dest, option in given.items() if dest not in output]
    if extra:
        raise InputError(f"--session holds the inputs; remove {', '.join(extra)}")
    return []
