"""A long text as the sentence (``--text-file FILE``, File → Open text…): read once, checked, one line on error."""

from __future__ import annotations

import os

from models.config import InputError
from models.io.files import read_bytes

MAX_TEXT_BYTES = 64 << 20  # 131,072 tokens of long words fit many times over


def read_text_file(path: str | os.PathLike) -> str:
    """The UTF-8 text of ``path`` (a regular file of at most :data:`MAX_TEXT_BYTES`), its line breaks
    as spaces (the sentence is one line): refused in one line when unreadable, not UTF-8 or empty."""
    data = read_bytes(path, "text file", MAX_TEXT_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"text file {os.fspath(path)} is not UTF-8 (byte {exc.start:,})") from None
    text = " ".join(text.split())
    if not text:
        raise InputError(f"text file {os.fspath(path)} holds no words")
    return text


def whole_model_text(args, mode: str) -> str:
    """The text a whole-model export (``mode``: ``--all-layers``, ``--all-steps``) runs on: ``--sentence``,
    or ``--text-file``'s text; one line saying what is missing (it said "needs --model and --sentence"
    with --model given and the text in a file)."""
    if not getattr(args, "model", None):
        raise InputError(f"{mode} needs --model")
    if getattr(args, "sentence", None):
        return args.sentence
    if getattr(args, "text_file", None):
        return read_text_file(args.text_file)
    raise InputError(f"{mode} needs --sentence or --text-file: the text the model reads")
