"""Write a folder all at once: files go to a hidden temporary folder that replaces the target.

``with atomic_folder(out, force) as tmp:`` yields an empty folder beside ``out``; whatever is
written into it appears at ``out`` only when the block ends without an error. The replace step
leaves either the old folder or the new one, whole, whatever happens:

- on Linux the two folders are swapped in one ``renameat2(RENAME_EXCHANGE)`` system call;
- elsewhere (or on a file system without it) the old folder is renamed aside, the new one into
  place, and the old one put back if the second rename fails; Ctrl+C and SIGTERM are held back
  (in the main thread) until both renames are done.

``--force`` replaces only a folder that holds a previous export of this tool and nothing else,
each file with the sha256 its manifest signed when it was written (see :func:`is_previous_export`
and :mod:`models.io.signatures`): a user's own files are never deleted.

The one writer discipline (issue 19), for every output (exports, ``--all-layers``, sessions,
screenshots, images from the window): write to a temporary sibling, flush and ``fsync`` it, check
it, rename it into place. The temporary is removed on any exception and on SIGTERM, SIGHUP and
SIGINT (while a write is under way, in the main thread, those signals raise :class:`Interrupted`;
after the clean-up a signal whose handler was the default one is delivered again, after one
line on stderr, so the process ends as it would have). A full disk (ENOSPC, EFBIG) is one
:class:`InputError` line; nothing is written through a memory map (that would be SIGBUS).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from models.config import InputError
from models.io.signatures import MANIFEST, sign_folder, unsigned

TOOL = "attention-explorer"
# Keys every manifest ever written by this tool has (the ones before the "tool" marker included).
LEGACY_KEYS = frozenset({"format", "query_tokens", "key_tokens", "config", "device", "stages"})
LEGACY_FORMAT = "attention-explorer-trace/1"
SURVEY_FORMAT = "attention-explorer-survey/1"  # export --all-layers (models/files/survey_export.py)
_MAX_MANIFEST_BYTES = 64 << 20


def umask() -> int:
    """The process umask, read without changing it (os.umask would race with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # no /proc: the classic way (brief, and only on such systems)
    os.umask(old)
    return old


def _why_not_previous_export(folder: Path) -> str | None:
    """None when ``folder`` holds exactly a previous export of this tool, else the reason."""
    from models.io import is_regular, read_json

    path = folder / MANIFEST
    if not is_regular(path) or path.is_symlink():
        return f"it has no {MANIFEST}"
    try:
        man = read_json(path, MANIFEST, limit=_MAX_MANIFEST_BYTES)
    except InputError:
        return f"its {MANIFEST} cannot be read"
    ours = man.get("tool") == TOOL or (
        LEGACY_KEYS <= man.keys() and man.get("format") == LEGACY_FORMAT
    )
    stages, files = man.get("stages"), man.get("files")
    if ours and isinstance(stages, list):  # a single-layer export: one file per stage
        listed = {MANIFEST} | {s.get("file") for s in stages if isinstance(s, dict)}
    elif ours and man.get("format") == SURVEY_FORMAT and isinstance(files, dict):  # --all-layers
        listed = {MANIFEST} | set(files)
    else:
        return f"its {MANIFEST} was not written by this tool"
    try:
        entries = list(folder.iterdir())
    except OSError as exc:
        return f"it cannot be listed ({exc.strerror or exc})"
    foreign = sorted(p.name for p in entries if p.name not in listed or not p.is_file() or p.is_symlink())
    if foreign:
        return f"it also holds files this tool did not write ({_shown(foreign)})"
    changed = unsigned(man, [p for p in entries if p.name != MANIFEST])
    if changed is None:
        return f"its {MANIFEST} signs no file (sha256), so what it lists cannot be proved to be this tool's"
    if changed:
        return f"its {MANIFEST} lists {_shown(changed)}, whose content this tool did not write"
    return None


def _shown(names: list[str]) -> str:
    return ", ".join(names[:3]) + (" …" if len(names) > 3 else "")


def is_previous_export(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds a previous export of this tool and nothing else."""
    return _why_not_previous_export(Path(folder)) is None


def check_target(out: str | os.PathLike, force: bool = False) -> Path:
    """Refuse a file, a non-empty folder (unless ``force`` and it is a previous export), or an
    unwritable place; return ``out`` as a Path."""
    out = Path(out)
    if out.is_symlink():
        raise InputError(f"output path {out} is a symbolic link; give a real folder")
    if out.exists() and not out.is_dir():
        raise InputError(f"output path {out} exists and is not a folder")
    try:
        non_empty = out.is_dir() and any(out.iterdir())
    except OSError as exc:
        raise InputError(f"cannot read output folder {out}: {exc.strerror or exc}") from None
    if non_empty and not force:
        raise InputError(f"output folder {out} exists and is not empty (use --force to replace it)")
    if out.is_dir() and Path.cwd().resolve().is_relative_to(out.resolve()):
        raise InputError(f"output folder {out} contains the current folder; choose a new folder")
    if non_empty:
        why = _why_not_previous_export(out)
        if why is not None:
            raise InputError(
                f"output folder {out} is not a previous export ({why}); --force replaces only "
                f"those, choose a new or empty folder"
            )
    parent = out.resolve().parent
    if parent.exists() and not parent.is_dir():
        raise InputError(f"cannot write to {out}: {parent} is a file, not a folder")
    if not parent.is_dir():
        raise InputError(f"cannot write to {out}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"cannot write to {out}: folder {parent} is not writable")
    return out


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived while a file was being written (SIGINT raises KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


CLEANUP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _raise_interrupted(signum, frame) -> None:
    raise Interrupted(signum)


@contextmanager
def cleanup_on_signals(label: str) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Interrupted` (so that the writer's
    ``except`` removes its temporary); afterwards, such a signal whose handler was the default
    is delivered again, after one line on stderr. Main thread only (signals are delivered there);
    a signal the process ignores (``nohup``) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    try:
        for sig in CLEANUP_SIGNALS:
            old = signal.getsignal(sig)
            if old is not signal.SIG_IGN and old is not _raise_interrupted:
                previous[sig] = signal.signal(sig, _raise_interrupted)
        yield
    except Interrupted as exc:
        handler = previous.get(exc.signum, signal.SIG_DFL)
        _restore(previous)
        previous = {}
        if handler in (signal.SIG_DFL, None):
            print(f"error: interrupted by {exc}: {label} was not written", file=sys.stderr, flush=True)
            signal.signal(exc.signum, signal.SIG_DFL)
            signal.raise_signal(exc.signum)  # ends the process as the signal would have
        raise
    finally:
        _restore(previous)


def _restore(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def sync_file(f) -> None:
    """Flush ``f`` and have the disk hold it: a full disk shows here, not after the rename."""
    f.flush()
    os.fsync(f.fileno())


def _reason(exc: OSError) -> str:
    """The OS's words; numpy's short write (``1536 requested and 992 written``, no errno) is a full
    disk or a file-size limit, said so."""
    text = exc.strerror or str(exc)
    if exc.errno is None and "requested and" in text and "written" in text:
        return f"No space left on device or file too large ({text})"
    return text


def _write_error(label: str, exc: OSError) -> InputError:
    return InputError(f"cannot write {label}: {_reason(exc)}")


@contextmanager
def atomic_file(path: str | os.PathLike, what: str = "") -> Iterator:
    """Yield a binary file to write ``path``'s new contents into: a temporary file beside it,
    flushed, synced and renamed into place (with the umask's permissions) when the block ends,
    removed when it raises or a signal arrives (:func:`cleanup_on_signals`), so an interrupted
    or failed write never leaves half a file where the old one was."""
    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    with cleanup_on_signals(str(path)):
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.partial-", suffix=path.suffix,
                                       dir=path.resolve().parent)  # fmt: skip
        except OSError as exc:
            raise _write_error(label, exc) from None
        try:
            with os.fdopen(fd, "wb") as f:
                yield f
                sync_file(f)
                written = f.tell()
            if os.stat(tmp).st_size < written:  # the check: the file holds all that was written
                raise OSError(0, f"only {os.stat(tmp).st_size} of {written} bytes reached the disk")
            os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; a file should follow the umask
            os.replace(tmp, path)
        except BaseException as exc:
            Path(tmp).unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise _write_error(label, exc) from None
            raise


@contextmanager
def atomic_folder(out: str | os.PathLike, force: bool = False) -> Iterator[Path]:
    """Yield an empty temporary folder; publish it as ``out`` when the block succeeds.

    On any error the temporary folder is removed and ``out`` is left as it was. An ``OSError``
    (disk full, permission) becomes a one-line :class:`InputError`.
    """
    out = check_target(out, force)
    parent = out.resolve().parent
    with cleanup_on_signals(str(out)):
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=parent))
            tmp.chmod(0o777 & ~umask())  # mkdtemp makes 0700; a folder should follow the umask
        except OSError as exc:
            raise InputError(f"cannot write to {out}: {exc.strerror or exc}") from None
        try:
            yield tmp
            sign_folder(tmp)  # what a later --force may remove: these bytes, no other
            sync_folder(tmp)
            check_target(out, force)  # it may have changed while we were writing
            publish(tmp, out)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, OSError):
                raise InputError(f"cannot write to {out}: {_reason(exc)}") from None
            raise


def sync_folder(folder: Path) -> None:
    """fsync every file written into ``folder``, and the folder itself, before it is published."""
    for path in folder.iterdir():
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # a folder cannot be opened on some systems: its files are synced
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def publish(tmp: Path, out: Path) -> None:
    """Move the finished ``tmp`` folder to ``out``, replacing an old ``out`` if there is one."""
    if not out.exists():
        os.replace(tmp, out)  # an empty folder is replaced by rename(2) itself
        return
    if not _exchange(tmp, out):
        _swap_by_renames(tmp, out)
    shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old folder


def _swap_by_renames(tmp: Path, out: Path) -> None:
    """``out`` -> ``tmp`` and ``tmp`` -> ``out`` with two renames; undo the first if needed."""
    aside = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:12]}")  # a name, not a folder
    with _interrupts_held():
        os.replace(out, aside)  # if this fails nothing has moved and nothing is left behind
        try:
            os.replace(tmp, out)
        except BaseException:
            os.replace(aside, out)  # put the old folder back
            raise
        os.replace(aside, tmp)  # so that the caller removes the old folder as ``tmp``


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one system call (Linux renameat2); False when unavailable."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: the file system cannot; use renames
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold Ctrl+C and SIGTERM back until the block ends (main thread only: elsewhere Python
    delivers signals to the main thread, which is not in the middle of the renames)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    signals = [signal.SIGINT, *CLEANUP_SIGNALS]
    previous = {}
    try:
        for sig in signals:
            previous[sig] = signal.signal(sig, lambda num, frame: received.append(num))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            signal.raise_signal(received[0])  # delivered now, to the handler the caller had
