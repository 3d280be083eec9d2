"""Open a file the user named: a regular file only, never a FIFO, device, socket or folder.

A FIFO given as ``--embeddings`` used to hang the program in ``open()`` (a FIFO's open waits for
a writer); a device such as ``/dev/zero`` would be read forever. :func:`open_regular` checks the
path with ``os.stat`` first, opens it with ``O_NONBLOCK`` (so that even a path swapped for a FIFO
between the two calls cannot block) and checks the opened descriptor again with ``fstat``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from models.config import InputError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


def _kind(mode: int) -> str | None:
    """None for a regular file, else what it is instead ("a FIFO (named pipe)")."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def reason(exc: OSError) -> str:
    """An OSError as a few words ("No such file or directory"), never a traceback."""
    return exc.strerror or str(exc) or type(exc).__name__


def _named(what: str, path) -> str:
    """How a message names the file: "embeddings file X.npy", or nothing when ``what`` is empty
    (the caller's prefix names it already: "session S.zip: is a FIFO ...")."""
    return f"{what} {path} " if what else ""


def _not_found(what: str, path) -> str:
    return f"{what} not found: {path}" if what else "file not found"


def _cannot(what: str, path, text: str) -> str:
    return f"cannot read {what} {path}: {text}" if what else f"cannot be read: {text}"


def check_regular(path: str | os.PathLike, what: str) -> os.stat_result:
    """``os.stat(path)``, refusing anything but a regular file with one line naming ``what``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(_not_found(what, path)) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        text = reason(exc) if isinstance(exc, OSError) else "invalid path"
        raise InputError(_cannot(what, path, text)) from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise InputError(f"{_named(what, path)}is {kind}, not a regular file")
    return st


def open_regular(path: str | os.PathLike, what: str) -> BinaryIO:
    """A binary file object for reading ``path`` (a regular file: see the module docstring)."""
    check_regular(path, what)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise InputError(_not_found(what, path)) from None
        raise InputError(_cannot(what, path, reason(exc))) from None
    try:
        kind = _kind(os.fstat(fd).st_mode)  # it may have been replaced since the stat
        if kind is not None:
            raise InputError(f"{_named(what, path)}is {kind}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, what: str, limit: int) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes (checked before reading)."""
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise InputError(f"{_named(what, path)}is too large ({size:,} bytes; at most {limit:,})")
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise InputError(_cannot(what, path, reason(exc))) from None
    if len(data) > limit:  # grew while we read it
        raise InputError(f"{_named(what, path)}is too large (more than {limit:,} bytes)")
    return data


def is_regular(path: str | os.PathLike) -> bool:
    """True for an existing regular file (following symbolic links); never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


__all__ = ["check_regular", "is_regular", "open_regular", "read_bytes", "reason"]


def file_version(path: str | os.PathLike) -> tuple[str, int, int] | None:
    """``(resolved path, size, mtime_ns)``: a key that changes when the file does (None: unreadable);
    what the parsed-file caches (tokenizers, GGUF headers) are keyed by."""
    try:
        st = Path(path).stat()
        return str(Path(path).resolve()), st.st_size, st.st_mtime_ns
    except OSError:
        return None


class VersionCache:
    """What was made from a file (a parsed header, a built tokenizer), kept for each version of the file
    (:func:`file_version`), the ``kept`` most recently used; thread-safe, made outside the lock."""

    def __init__(self, kept: int) -> None:
        import threading
        from collections import OrderedDict

        self.kept = kept
        self._made: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str | os.PathLike, make):
        """The value made from ``path``'s current version: ``make()`` called when there is none yet."""
        key = file_version(path)
        with self._lock:
            if key in self._made:
                self._made.move_to_end(key)
                return self._made[key]
        value = make()
        if key is not None:
            with self._lock:
                self._made[key] = value
                while len(self._made) > self.kept:
                    self._made.popitem(last=False)
        return value
