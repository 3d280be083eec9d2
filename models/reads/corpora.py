"""The corpora an atlas reads, streamed and never read whole: ``(number, text)`` for every text.

- plain text: a line a text (blank lines skipped), numbered by line;
- JSONL (``.jsonl``, ``.ndjson``): an object a line with a ``"text"`` string, numbered by line;
- a folder of ``.txt`` files (not its subfolders): a file a text, in the order of their names,
  numbered from 1.

A text longer than :data:`MAX_TEXT_CHARS` is cut there (the model truncates anyway; a file of a
folder is read only that far). Bad input (unreadable, not UTF-8, a JSONL line that is not an object
with a ``"text"`` string, a folder without ``.txt`` files) is an :class:`InputError` naming the line or
the file. :func:`corpus_identity` is what a run records and an atlas's parts are checked against:
the path, the kind, the size and a sha256 of every byte read (a folder's: of each file's name and
bytes, in order).

Standard library only; no Qt.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from models.errors import InputError

MAX_TEXT_CHARS = 100_000  # a longer text is cut here before tokenizing (the model truncates anyway)
JSONL_SUFFIXES = (".jsonl", ".ndjson")


def corpus_kind(path: str | os.PathLike) -> str:
    """``"folder"``, ``"jsonl"`` or ``"lines"``; an InputError when ``path`` is neither a file nor a folder."""
    p = Path(path)
    if p.is_dir():
        return "folder"
    if not p.is_file():
        raise InputError(f"corpus {p} is not a file or a folder")
    return "jsonl" if p.suffix.lower() in JSONL_SUFFIXES else "lines"


def corpus_lines(path: str | os.PathLike, hasher=None) -> Iterator[tuple[int, str]]:
    """``(number from 1, text)`` for every text of the corpus, read one at a time; ``hasher`` (a
    hashlib object) sees every byte read (:func:`corpus_identity`)."""
    kind = corpus_kind(path)
    if kind == "folder":
        yield from _folder_texts(Path(path), hasher)
    else:
        yield from _line_texts(path, kind == "jsonl", hasher)


def _line_texts(path, jsonl: bool, hasher) -> Iterator[tuple[int, str]]:
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed in finally, the generator may stop early
    except OSError as exc:
        raise InputError(f"cannot read corpus {path}: {exc.strerror or exc}") from None
    try:
        for number, raw in enumerate(f, start=1):
            if hasher is not None:
                hasher.update(raw)
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise InputError(f"corpus {path}, line {number}: not UTF-8 text") from None
            if text and jsonl:
                text = _json_text(path, number, text)
            if text:
                yield number, text[:MAX_TEXT_CHARS]
    except OSError as exc:
        raise InputError(f"cannot read corpus {path}: {exc.strerror or exc}") from None
    finally:
        f.close()


def _json_text(path, number: int, line: str) -> str:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        raise InputError(f"corpus {path}, line {number}: not a JSON object") from None
    text = record.get("text") if isinstance(record, dict) else None
    if not isinstance(text, str):
        raise InputError(f"corpus {path}, line {number}: no \"text\" string (a JSONL corpus has one per line)")
    return text.strip()


def folder_files(folder: Path) -> list[Path]:
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".txt" and not p.is_dir())
    except OSError as exc:
        raise InputError(f"cannot read corpus folder {folder}: {exc.strerror or exc}") from None
    if not files:
        raise InputError(f"corpus folder {folder} has no .txt files")
    return files


def _folder_texts(folder: Path, hasher) -> Iterator[tuple[int, str]]:
    from models.io import check_regular

    for number, path in enumerate(folder_files(folder), start=1):
        check_regular(path, "corpus file")  # a FIFO named .txt is refused, never waited on
        decoder = codecs.getincrementaldecoder("utf-8")()
        if hasher is not None:
            hasher.update(path.name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(path, "rb") as f:
                raw = f.read(4 * MAX_TEXT_CHARS)  # at most 4 bytes a character: enough for the cut
                if hasher is not None:
                    hasher.update(raw)
                    for block in iter(lambda: f.read(1 << 20), b""):
                        hasher.update(block)
        except OSError as exc:
            raise InputError(f"cannot read corpus file {path}: {exc.strerror or exc}") from None
        try:
            text = decoder.decode(raw, final=False).strip()  # a character cut at the end waits, unread
        except UnicodeDecodeError:
            raise InputError(f"corpus file {path}: not UTF-8 text") from None
        if text:
            yield number, text[:MAX_TEXT_CHARS]


def corpus_identity(path: str | os.PathLike) -> dict:
    """``{"path", "kind", "sha256", "bytes"}`` of a corpus (its every byte read once, streamed)."""
    p = Path(path)
    kind = corpus_kind(p)
    h = hashlib.sha256()
    if kind == "folder":
        for _ in corpus_lines(p, h):
            pass
        size = sum(f.stat().st_size for f in folder_files(p))
    else:
        try:
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            size = p.stat().st_size
        except OSError as exc:
            raise InputError(f"cannot read corpus {p}: {exc.strerror or exc}") from None
    return {"path": str(p.resolve()), "kind": kind, "sha256": h.hexdigest(), "bytes": size}


def count_texts(path: str | os.PathLike, limit: int | None = None) -> int:
    """The corpus's texts (for a progress bar), at most ``limit``, reading one at a time."""
    n = 0
    for _ in corpus_lines(path):
        n += 1
        if limit is not None and n >= limit:
            break
    return n
