"""Large blocks are mapped from the system and given back when freed, never kept in the C heap; and
the heap's freed pages given back after a long run's block (:func:`return_freed_memory`).

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
import functools

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MAPPED_FROM = 4 << 20  # blocks of at least this many bytes are mapped (a band is 16 MiB; most arrays are smaller)


@functools.cache
def _glibc():
    """The C library when it is glibc (it has ``mallopt`` and ``malloc_trim``), else None (musl, macOS)."""
    name = ctypes.util.find_library("c")  # runs a subprocess: once
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and libc.mallopt and libc.malloc_trim else None
    except (OSError, AttributeError):
        return None


def map_large_blocks(threshold: int = MAPPED_FROM) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes for this process; False where there is no glibc."""
    libc = _glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1


def return_freed_memory() -> None:
    """Give the C heap's freed pages back to the system (glibc's ``malloc_trim``; nothing elsewhere).
    A long run of batches of varying shapes (the atlas's blocks) otherwise fragments the heap and its
    resident memory creeps up with the corpus (MiniLM's atlas: 0.59 GiB a worker at 10,000 texts,
    0.71 at 100,000; trimmed after each block, flat at ~0.36)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
