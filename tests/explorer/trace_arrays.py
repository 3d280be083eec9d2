"""Every stage's array of a trace, and exact comparison with them (session tests)."""

import numpy as np


def stage_arrays(trace) -> dict:
    return {s.name: s.array.copy() for s in trace.stages}


def assert_same_arrays(trace, arrays) -> None:
    assert trace.names == tuple(arrays)
    for name, array in arrays.items():
        assert np.array_equal(trace[name].array, array, equal_nan=True), name
