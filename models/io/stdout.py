"""Standard output that cannot be written: one ``error:`` line, or a quiet exit for a closed pipe.

Every command (and the window's ``--screenshot``) runs inside :func:`guarded_stdout`, from the one
entry point (``main.interrupted_main``). ``sys.stdout`` is then a writer over the same file
descriptor whose failure raises :class:`StdoutFailed` (not an ``OSError``: no command's own
``except OSError`` mistakes it for a file of its own), and whose later writes are dropped.

- The reader has gone (``main.py why ... | head -0``, ``| true``): EPIPE. The command ends quietly,
  status 141 (128 + SIGPIPE, what a shell reports for ``cat`` or ``git`` killed by SIGPIPE; with
  ``set -o pipefail`` the pipeline fails as theirs does), no traceback.
- Any other failure (``> /dev/full``, a full disk, a file-size limit): one ``error:`` line on stderr,
  status 2; when stdout is a regular file, it is cut back to the size it had when the command began
  (nothing half-written: a JSON object is whole or absent), unless stderr writes to the same file.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager

CLOSED_PIPE = 141  # 128 + SIGPIPE (13), as a shell reports a command a closed pipe ended


class StdoutFailed(Exception):
    """stdout could not be written; ``error`` is the OSError the write raised."""

    def __init__(self, error: OSError) -> None:
        super().__init__(f"cannot write to standard output: {error.strerror or error}")
        self.error = error

    @property
    def closed_pipe(self) -> bool:
        return self.error.errno == errno.EPIPE


def _regular_size(fd: int) -> tuple[int, int, int] | None:
    """(device, inode, size) of ``fd`` if it is a regular file, else None."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size) if stat.S_ISREG(st.st_mode) else None


class _GuardedRaw(io.RawIOBase):
    """Writes to ``fd``; the first failure raises :class:`StdoutFailed`, and is kept in ``failed``."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.failed: StdoutFailed | None = None

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:
        if self.failed is not None:
            return len(data)  # already failed: the rest is dropped (and a flush at exit cannot fail)
        try:
            return os.write(self._fd, data)
        except OSError as exc:
            self.failed = StdoutFailed(exc)
            raise self.failed from exc


class StdoutGuard:
    """What :func:`guarded_stdout` yields: ``finish(code)`` turns a failure into the exit status."""

    def __init__(self, raw: _GuardedRaw, start: tuple[int, int, int] | None) -> None:
        self.raw = raw
        self.start = start  # stdout's (device, inode, size) when the command began, if a regular file

    def finish(self, code: int) -> int:
        """Flush what is left; the status to exit with (``code`` if stdout took everything)."""
        try:
            sys.stdout.flush()
        except StdoutFailed:
            pass
        failed = self.raw.failed
        if failed is None:
            return code
        if failed.closed_pipe:
            return CLOSED_PIPE
        self._cut_back()
        try:
            print(f"error: {failed}", file=sys.stderr)
        except OSError:
            pass  # stderr is gone too: the status says it
        return 2

    def _cut_back(self) -> None:
        """A regular file stdout back to its size at the start (what this command wrote, removed)."""
        now = _regular_size(self.raw.fileno())
        if self.start is None or now is None or now[:2] != self.start[:2]:
            return
        if (err := _regular_size(2)) is not None and err[:2] == self.start[:2]:
            return  # stderr writes to the same file: its lines are not ours to remove
        try:
            os.ftruncate(self.raw.fileno(), self.start[2])
        except OSError:
            pass


@contextmanager
def guarded_stdout() -> Iterator[StdoutGuard]:
    """``sys.stdout`` as a guarded writer (same descriptor, encoding and buffering) for the block."""
    old = sys.stdout
    try:
        fd = old.fileno()
    except (AttributeError, OSError, ValueError):  # no real stdout (a test's capture): nothing to guard
        yield StdoutGuard(_GuardedRaw(-1), None)
        return
    old.flush()
    raw = _GuardedRaw(fd)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw), encoding=old.encoding, errors=old.errors, line_buffering=old.line_buffering,
        write_through=getattr(old, "write_through", False),
    )  # fmt: skip
    try:
        yield StdoutGuard(raw, _regular_size(fd))
    finally:
        try:
            sys.stdout.flush()
        except StdoutFailed:
            pass
        if raw.failed is not None and raw.failed.closed_pipe:
            _quiet(fd)
        sys.stdout = old


def _quiet(fd: int) -> None:
    """Point ``fd`` at /dev/null, so the interpreter's own flush at exit cannot fail on it again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass
