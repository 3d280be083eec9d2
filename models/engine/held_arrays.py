"""The arrays of a :class:`models.runspec.RunSpec` (what its file options held), kept in memory:
what a session brought, so that reopening one writes nothing to the user's disk.

:class:`HeldArrays` is immutable and compares by value (dtype, shape and a hash of the bytes), so that it can sit
in the frozen RunSpec (and the window's ``Inputs``) and ``spec == spec`` still means "the same
computation". Names are a session's members (models/files/session.py): ``embeddings``,
``cross_embeddings``, ``mask``, ``weights/W_q`` …
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping

import numpy as np

ROLES = ("embeddings", "cross_embeddings", "weights")  # what the window's Inputs can take from memory


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array``, read-only. One handed over read-only and C-contiguous (what the readers give:
    models.files.run_files.load_matrix, a session's members) is kept as it is: copying a 2 GiB matrix
    doubled the peak (issue 36); any other is copied first, so no one else can change it."""
    array = np.asarray(array)
    if array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array, copy=True, order="C")
        array.flags.writeable = False
    return array


def _digest(array: np.ndarray) -> bytes:
    """The array's bytes, hashed in place (``tobytes()`` made a second whole copy)."""
    return hashlib.blake2b(memoryview(array).cast("B") if array.size else b"", digest_size=32).digest()


class HeldArrays(Mapping[str, np.ndarray]):
    """``{"embeddings": (n, d_model), "weights/W_q": (h, d_model, d_k), …}``, read-only."""

    __slots__ = ("_arrays", "_key")

    def __init__(self, arrays: Mapping[str, np.ndarray] | None = None):
        self._arrays = {name: _frozen(a) for name, a in sorted((arrays or {}).items())}
        self._key = tuple((n, a.dtype.str, a.shape, _digest(a)) for n, a in self._arrays.items())

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __eq__(self, other) -> bool:
        return isinstance(other, HeldArrays) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __deepcopy__(self, memo) -> HeldArrays:  # immutable: dataclasses.asdict may share it
        return self

    def __repr__(self) -> str:
        return f"HeldArrays({', '.join(f'{n}: {a.shape}' for n, a in self._arrays.items())})"

    def weights(self) -> dict[str, np.ndarray] | None:
        """The weights as a ``.npz`` would hold them (``W_q`` …), or None when there are none."""
        found = {n.removeprefix("weights/"): a for n, a in self._arrays.items() if n.startswith("weights/")}
        return found or None

    def without(self, role: str) -> HeldArrays:
        """These arrays less ``role`` ("embeddings", "cross_embeddings" or "weights")."""
        keep = {n: a for n, a in self._arrays.items() if n != role and not n.startswith(role + "/")}
        return HeldArrays(keep)

    def describe(self) -> str:
        """"embeddings 5×12, weights" (for notices)."""
        parts = [f"{n.replace('_', ' ')} {'×'.join(map(str, self._arrays[n].shape))}"
                 for n in ("embeddings", "cross_embeddings") if n in self._arrays]  # fmt: skip
        return ", ".join(parts + (["weights"] if self.weights() else []))
