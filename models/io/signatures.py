"""What ``--force`` may remove: the files whose bytes are what this tool wrote (issue 50, item 6).

Every folder the tool writes (:func:`models.io.atomic.atomic_folder`) gets, in its ``manifest.json``,
``"sha256": {file name: hex digest}`` of every other file, computed after the files are written
and before the folder is published (:func:`sign_folder`). ``--force`` then replaces a folder only
when each of its files has the digest its manifest signed (:func:`unsigned`): a ``manifest.json``
that lists a user's ``thesis.tex``, edited by hand or copied from elsewhere, does not make it
removable; a file of ours overwritten by the user is not removed either. A folder written before
the signatures (no ``sha256``) is refused as well: its content cannot be proved.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

MANIFEST = "manifest.json"
SIGNATURES = "sha256"  # the manifest's key: {file name: sha256 hex digest of its bytes}


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 hex digest of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sign_folder(folder: Path) -> None:
    """Add to ``folder``'s manifest (if it has one) the sha256 of every other regular file in it."""
    path = folder / MANIFEST
    if not path.is_file():
        return
    files = sorted(p for p in folder.iterdir() if p.name != MANIFEST and p.is_file() and not p.is_symlink())
    man = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(man, dict):
        return
    man[SIGNATURES] = {p.name: file_sha256(p) for p in files}
    text = json.dumps(man, indent=2, ensure_ascii=False)
    # A name that is not UTF-8 (a folder's bytes) stays a JSON \udcXX escape, as the writers wrote it.
    path.write_text(text + "\n", encoding="utf-8", errors="backslashreplace")


def unsigned(man: dict, files: Iterable[Path]) -> list[str] | None:
    """The names among ``files`` (the folder's, but the manifest) whose bytes are not the ones the
    manifest signed; None when the manifest holds no signatures at all."""
    sums = man.get(SIGNATURES)
    if not isinstance(sums, dict):
        return None
    return sorted(p.name for p in files if not isinstance(sums.get(p.name), str) or sums[p.name] != file_sha256(p))
