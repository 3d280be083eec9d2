"""ONE safe reader for every file the app opens (see docs/hardening.md).

- :func:`open_regular`, :func:`read_bytes`: regular files only (a FIFO or device is refused at
  once, never waited on), sizes checked before reading;
- :func:`read_json`, :func:`parse_json`: size, depth, number length, NaN and the top-level type;
- :func:`load_array`, :func:`read_npy`, :func:`read_npz`: ``.npy``/``.npz`` headers checked
  against the bytes there and the memory budget before any data is read, never unpickled;
- :func:`open_zip` (:class:`SafeZip`): members' method, encryption, names and declared sizes
  checked, decompressed as a capped stream.

Every failure is one :class:`models.config.InputError` line naming the file.
"""

from __future__ import annotations

import os

import numpy as np

from models.config import InputError
from models.io.files import check_regular, is_regular, open_regular, read_bytes, reason
from models.io.jsonfile import parse_json, read_json
from models.io.npy import MAGIC, read_array, read_header
from models.io.zips import SafeZip, npz_arrays, open_zip, read_npz

ZIP_MAGIC = b"PK\x03\x04"


def load_array(path: str | os.PathLike, what: str, check_shape=None) -> np.ndarray | dict[str, np.ndarray]:
    """What ``np.load(path, allow_pickle=False)`` returns (an array, or ``{key: array}`` for a
    ``.npz``), read safely whatever the file's name says it is."""
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(len(MAGIC))
        if head[:4] == ZIP_MAGIC:
            f.seek(0)
            with SafeZip(f, f"{what} {path}") as z:
                return npz_arrays(z)
        if head != MAGIC:
            raise InputError(f"cannot read {what} {path}: neither a .npy nor a .npz file")
        f.seek(0)
        return read_array(f, f"{what} {path}", size, check_shape)


def read_npy(path: str | os.PathLike, what: str, check_shape=None) -> np.ndarray:
    """A single array (a ``.npz`` is refused: give a single-matrix ``.npy``)."""
    loaded = load_array(path, what, check_shape)
    if isinstance(loaded, dict):
        raise InputError(f"{what} file {path} is a .npz archive; give a single-matrix .npy file")
    return loaded


__all__ = ["InputError", "SafeZip", "check_regular", "is_regular", "load_array", "open_regular", "open_zip",
           "parse_json", "read_array", "read_bytes", "read_header", "read_json", "read_npy", "read_npz",
           "reason"]  # fmt: skip
