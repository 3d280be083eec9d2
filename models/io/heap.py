"""Large blocks are mapped from the system and given back when freed, never kept in the C heap.

glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), after which
blocks of that size come from the heap: a pass over a long input's stage allocates and frees a
16 MiB band after band, each time with a small result (a band's pixel rows) kept after it, and the
freed bands could not be given back. ``--stage masked`` of a 16,384-token window grew 25 MiB a band
to 1.8 GiB for one head (358 MiB with the threshold fixed; issue 50, point 1). Fixing the threshold
(``mallopt(M_MMAP_THRESHOLD)``, as ``MALLOC_MMAP_THRESHOLD_`` does) also turns the dynamic raise off.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MAPPED_FROM = 4 << 20  # blocks of at least this many bytes are mapped (a band is 16 MiB; most arrays are smaller)


def map_large_blocks(threshold: int = MAPPED_FROM) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes for this process; False where there is no glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1
