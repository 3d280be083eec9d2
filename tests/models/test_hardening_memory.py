"""Memory before checks (issue 36, item 3): a matrix file's shape and the memory the run will hold
are checked from its ``.npy`` header before any data is read, and what was read is held without
a copy. Before, a session holding honest 2 GiB embeddings peaked at 4.5 GB (HeldArrays copied the
array, then ``tobytes()`` copied it again), and a 2 GiB ``--embeddings`` file was read whole before
its shape was checked. Peaks are measured with tracemalloc (numpy reports its buffers to it)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from numpy.lib import format as npformat

import models.memory as memory
from models.cli.export import build_parser
from models.config import DEFAULT_MAX_TOKENS, InputError
from models.engine.held_arrays import HeldArrays
from models.files.run_files import load_matrix, spec_from_args
from models.files.session import Session, load_session, save_session
from models.runspec import RunSpec

MIB = 1 << 20
ROWS, D = 2048, 2048  # 16 MiB of float32


def _peak(call) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _big() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((ROWS, D), dtype=np.float32)


def test_held_arrays_keep_a_read_only_array_without_a_copy():
    array = _big()
    array.flags.writeable = False
    held, peak = _peak(lambda: HeldArrays({"embeddings": array}))
    assert peak < MIB, f"{peak:,} bytes allocated to hold {array.nbytes:,}"
    assert held["embeddings"] is array
    assert held == HeldArrays({"embeddings": array.copy()}) != HeldArrays({"embeddings": array[::-1].copy()})


def test_held_arrays_copy_a_writeable_array_once_and_no_one_can_change_it():
    array = _big()
    held, peak = _peak(lambda: HeldArrays({"embeddings": array}))
    assert peak < 1.2 * array.nbytes, f"{peak:,} bytes allocated to hold {array.nbytes:,}"
    array[0, 0] = 1e9
    assert held["embeddings"][0, 0] != 1e9 and not held["embeddings"].flags.writeable


def test_an_embeddings_file_is_read_once(tmp_path):
    np.save(tmp_path / "x.npy", _big())
    args = build_parser().parse_args(["--embeddings", str(tmp_path / "x.npy"), "--d-model", str(D),
                                      "--out", str(tmp_path / "o")])  # fmt: skip
    spec, peak = _peak(lambda: spec_from_args(args))
    nbytes = ROWS * D * 4
    assert peak < 1.2 * nbytes, f"{peak:,} bytes allocated to read {nbytes:,}"
    assert spec.arrays["embeddings"].shape == (ROWS, D)


def test_a_session_with_big_embeddings_is_read_once(tmp_path, monkeypatch):
    """Its arrays are read once and held as read; the run that then checks the session is the
    toy's own computation (refused by its memory estimate when it does not fit), not measured here."""
    import models.files.session

    monkeypatch.setattr(models.files.session, "check_session", lambda session: None)
    small = HeldArrays({"embeddings": np.ones((2, 4), np.float32)})
    load_session(save_session(tmp_path / "small.zip", Session(RunSpec(arrays=small, d_model=4))))  # imports done
    big = np.arange(4096 * 3072, dtype=np.float32).reshape(4096, 3072)  # 48 MiB: 3 of the reader's chunks
    path = save_session(tmp_path / "s.zip", Session(RunSpec(arrays=HeldArrays({"embeddings": big}), d_model=3072)))
    session, peak = _peak(lambda: load_session(path))
    chunks = 4 * (16 * MIB)  # the zip reader's 16 MiB chunks and the decompressor's buffers
    assert peak < big.nbytes + chunks, f"{peak:,} bytes allocated to read {big.nbytes:,}"
    assert session.run.arrays["embeddings"].shape == big.shape


@pytest.mark.parametrize("what, shape, message", [
    ("embeddings", (3, 4, 5), "must be a 2-D matrix (n x d_model), got shape (3, 4, 5)"),
    ("cross embeddings", (0, 16), "has no rows"),
    ("embeddings", (DEFAULT_MAX_TOKENS + 1, 16), f"more than the limit of {DEFAULT_MAX_TOKENS} tokens"),
    ("mask", (4, DEFAULT_MAX_TOKENS + 1), f"more than the limit of {DEFAULT_MAX_TOKENS} tokens"),
    ("embeddings", (16_000, 100_000), "of memory but only"),
])  # fmt: skip
def test_a_matrix_file_is_refused_from_its_header_before_any_data(tmp_path, monkeypatch, what, shape, message):
    """The header alone, no data after it: a refusal from the header names the shape, not "truncated"."""
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 30)
    path = tmp_path / "m.npy"
    with open(path, "wb") as f:
        npformat.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
    with pytest.raises(InputError) as refused:
        load_matrix(str(path), what)
    assert message in str(refused.value) and str(path) in str(refused.value)
