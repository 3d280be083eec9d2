"""Zip archives from a user (session files, ``.npz``): every member checked before it is read.

A member is refused, with one line, when it is encrypted, uses a compression method other than
stored or deflate, shares its name with another member, or declares more bytes than the budget
allows. Data is decompressed as a stream that stops at the declared size (zipfile checks the
CRC), so a 2 MB file holding an honest 2 GiB array is refused from its headers, in milliseconds,
before anything is decompressed; ``.npy`` members are also checked from their own header
(:mod:`models.io.npy`) before their data is read.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from typing import BinaryIO

import numpy as np

from models.config import InputError
from models.io.files import open_regular
from models.io.npy import read_array
from models.memory import check_memory

MAX_MEMBERS = 10_000
METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError,
          OverflowError)  # fmt: skip


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__


class SafeZip:
    """A zip archive opened for reading: ``names``, :meth:`read` (bytes) and :meth:`array` (``.npy``)."""

    def __init__(self, file: BinaryIO, what: str, kind: str = "zip archive") -> None:
        self.what = what
        self._at = f"{what}: " if what else ""
        try:
            self._zf = zipfile.ZipFile(file)
            infos = self._zf.infolist()
        except ERRORS as exc:
            text = f"not a readable {kind} (corrupt or truncated: {_first_line(exc)})"
            raise InputError(f"cannot read {what}: {text}" if what else text) from None
        if len(infos) > MAX_MEMBERS:
            raise InputError(f"{what or 'it'} holds {len(infos):,} members; at most {MAX_MEMBERS:,} are read")
        self._infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if info.filename in self._infos:
                raise InputError(f"{what or 'it'} holds two members named {info.filename!r}")
            self._infos[info.filename] = info

    @property
    def names(self) -> list[str]:
        return list(self._infos)

    def info(self, name: str) -> zipfile.ZipInfo:
        """The member's entry, checked: present, not encrypted, a method we read."""
        info = self._infos.get(name)
        if info is None:
            raise InputError(f"{self._at}member {name} is missing")
        if info.flag_bits & 0x1:
            raise InputError(f"{self._at}member {name} is encrypted; save it without a password")
        if info.compress_type not in METHODS:
            raise InputError(
                f"{self._at}member {name} uses compression method {info.compress_type}; only "
                f"{' and '.join(METHODS.values())} are read"
            )
        return info

    def read(self, name: str, limit: int) -> bytes:
        """A member's bytes, at most ``limit`` (its declared size checked first)."""
        info = self.info(name)
        if info.file_size > limit:
            raise InputError(f"{self._at}member {name} is too large ({info.file_size:,} bytes; at most {limit:,})")
        try:
            with self._zf.open(info) as f:
                return f.read(limit + 1)
        except ERRORS as exc:
            raise InputError(f"{self._at}member {name} cannot be read ({_first_line(exc)})") from None

    def array(self, name: str, check_shape=None) -> np.ndarray:
        """A ``.npy`` member as an array: its declared size and header checked before its data."""
        info = self.info(name)
        check_memory(info.file_size, f"reading {self._at}member {name} ({info.file_size:,} bytes)")
        try:
            with self._zf.open(info) as f:
                return read_array(_Counted(f), f"{self._at}member {name}", info.file_size, check_shape)
        except InputError:
            raise
        except ERRORS as exc:
            raise InputError(f"{self._at}member {name} cannot be read ({_first_line(exc)})") from None

    def close(self) -> None:
        self._zf.close()

    def __enter__(self) -> SafeZip:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Counted:
    """A forward-only stream that knows its position (a ZipExtFile's ``tell`` is slow to seek)."""

    def __init__(self, f) -> None:
        self._f, self._pos = f, 0

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self._pos += len(data)
        return data

    def readinto(self, buffer) -> int:
        n = self._f.readinto(buffer)
        self._pos += n or 0
        return n

    def tell(self) -> int:
        return self._pos

    def seekable(self) -> bool:
        return True  # tell() is exact, which is all read_array asks of it


def open_zip(path: str | os.PathLike, what: str) -> SafeZip:
    """A zip archive on disk (a regular file only)."""
    f = open_regular(path, what)
    try:
        return _Owning(f, f"{what} {path}")
    except BaseException:
        f.close()
        raise


class _Owning(SafeZip):
    def __init__(self, file: BinaryIO, what: str) -> None:
        self._file = file
        super().__init__(file, what)

    def close(self) -> None:
        super().close()
        self._file.close()


def npz_key(name: str) -> str:
    """The key ``np.load`` gives a member: its name without ``.npy``."""
    return name[:-4] if name.endswith(".npy") else name


def read_npz(path: str | os.PathLike, what: str) -> dict[str, np.ndarray]:
    """Every array of a ``.npz`` (``{key: array}``), each checked before it is read."""
    with open_zip(path, what) as z:
        return npz_arrays(z)


def npz_arrays(z: SafeZip) -> dict[str, np.ndarray]:
    keys: dict[str, str] = {}
    for name in z.names:
        if name.endswith("/"):
            continue  # a folder entry
        key = npz_key(name)
        if key in keys:
            raise InputError(f"{z.what or 'it'} holds two arrays named {key!r} ({keys[key]} and {name})")
        keys[key] = name
    total = sum(z.info(name).file_size for name in keys.values())
    check_memory(total, f"reading {z.what or 'the archive'} ({total:,} bytes of arrays)")
    return {key: z.array(name) for key, name in keys.items()}
