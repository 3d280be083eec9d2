"""Hostile zip archives for the reader tests: members with a forged compression method, an
encryption flag, clashing names, or a declared size much larger than what is stored."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import numpy as np


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def write_zip(path: Path, members: list[tuple[str, bytes]], method=zipfile.ZIP_DEFLATED) -> Path:
    """Members written in order (the same name twice is allowed, as zipfile warns but writes)."""
    import warnings

    with zipfile.ZipFile(path, "w", method) as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name"
        for name, data in members:
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            zf.writestr(info, data)
    return path


def _forge(path: Path, fields: tuple[tuple[bytes, int], ...], change) -> Path:
    data = bytearray(path.read_bytes())
    for signature, offset in fields:
        start = 0
        while (at := data.find(signature, start)) >= 0:
            (old,) = struct.unpack_from("<H", data, at + offset)
            struct.pack_into("<H", data, at + offset, change(old))
            start = at + 4
    path.write_bytes(bytes(data))
    return path


def forge_method(path: Path, method: int) -> Path:
    """Rewrite every member's compression method (local and central headers) to ``method``."""
    return _forge(path, ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)), lambda old: method)


def forge_encrypted(path: Path) -> Path:
    """Set every member's "encrypted" flag (bit 0 of the general purpose flags)."""
    return _forge(path, ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)), lambda old: old | 0x1)


def honest_big_npy_member(path: Path, name: str, shape: tuple[int, ...]) -> Path:
    """A zip whose member ``name`` is a real, deflated ``.npy`` of zeros of ``shape`` (float32):
    a few MB on disk for GBs of data (how a session holding an honest 2 GiB array looks)."""
    from numpy.lib import format as npformat

    header = io.BytesIO()
    npformat.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    total = int(np.prod(shape)) * 4
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED  # a ZipInfo is stored unless told otherwise
        with zf.open(info, "w", force_zip64=True) as f:
            f.write(header.getvalue())
            left = total
            while left:
                f.write(chunk[: min(left, len(chunk))])
                left -= min(left, len(chunk))
    return path
