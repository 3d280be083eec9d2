"""``.npy`` arrays read from a stream: the header first, its shape and dtype checked against the
bytes actually there and the memory budget (models/memory.py), and only then the data.

Never unpickles: a dtype holding Python objects is refused from the header alone. A header
claiming 10¹⁰ floats is refused before a byte of data is read or allocated.
"""

from __future__ import annotations

import math
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npformat

from models.config import InputError
from models.memory import check_memory

MAGIC = b"\x93NUMPY"
KINDS = "biufcUS"  # booleans, integers, floats, complex, text; never objects, records or dates
_CHUNK = 16 << 20


def read_header(f: BinaryIO, what: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` at the stream's position."""
    try:
        version = npformat.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(f)
        else:
            raise InputError(f"cannot read {what}: not a readable .npy (format version {version[0]}.{version[1]})")
    except InputError:
        raise
    except (ValueError, EOFError, SyntaxError, TypeError, OverflowError, UnicodeDecodeError) as exc:
        text = str(exc).splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot read {what}: not a readable .npy ({text})") from None
    if dtype.hasobject:
        raise InputError(f"cannot read {what}: not a readable .npy (it holds Python objects, a pickle, which is "
                         f"never read; save plain numbers)")
    if dtype.kind not in KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise InputError(f"cannot read {what}: it holds {dtype}, not numbers or text")
    return tuple(int(n) for n in shape), bool(fortran), dtype


def read_array(f: BinaryIO, what: str, available: int | None = None, check_shape=None) -> np.ndarray:
    """The array at the stream's position. ``available``: the bytes left in the file or member
    from the start of the ``.npy`` (a header claiming more is refused as truncated);
    ``check_shape(shape)`` may refuse the shape (InputError) before any data is read."""
    shape, fortran, dtype = read_header(f, what)
    if check_shape is not None:
        check_shape(shape)
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if available is not None:
        left = available - f.tell() if f.seekable() else None
        if left is not None and nbytes > left:
            raise InputError(
                f"cannot read {what}: truncated or its header is wrong: shape {shape} of {dtype} needs "
                f"{nbytes:,} bytes, the file holds {max(left, 0):,}"
            )
    check_memory(nbytes, f"reading {what} (shape {shape})")
    array = np.empty(count, dtype=dtype)
    if nbytes:
        view = memoryview(array.view(np.uint8))
        done = 0
        try:
            while done < nbytes:
                got = f.readinto(view[done : done + _CHUNK])
                if not got:
                    break
                done += got
        except OSError as exc:
            raise InputError(f"cannot read {what}: {exc.strerror or exc}") from None
        if done < nbytes:
            raise InputError(f"cannot read {what}: truncated ({done:,} of {nbytes:,} bytes of data)")
    if fortran:
        return array.reshape(shape[::-1]).transpose()
    return array.reshape(shape)


def is_npy(head: bytes) -> bool:
    return head.startswith(MAGIC)
