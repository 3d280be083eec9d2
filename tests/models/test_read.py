"""models.reads.read: the one read of a trace the window and a notebook share (issue 46), without Qt."""

import numpy as np
import pytest

from models import api
from models.config import InputError
from models.reads.read import ReadRequest, read


@pytest.fixture(scope="module")
def toy():
    return api.toy("The cat sat on the mat.", heads=2, mask="causal")


def test_rows_and_cells_are_the_stages_numbers(toy):
    weights = toy.stage("weights")  # (heads, n_q, n_k), as export writes it
    rows = read(toy, ReadRequest("weights", "rows", heads=(1,), region=(2, 5, 0, 0)))
    np.testing.assert_allclose(rows, weights[1, 2:5], rtol=1e-6)
    assert read(toy, ReadRequest("weights", "cell", cell=(1, 3, 2))) == pytest.approx(float(weights[1, 3, 2]))
    output = toy.stage("output")
    assert read(toy, ReadRequest("output", "cell", cell=(4, 1))) == pytest.approx(float(output[4, 1]))
    assert read(toy.raw, ReadRequest("weights", "rows")).shape == weights[0].shape  # the engine's trace too


def test_a_picture_has_the_pixels_asked_and_one_plane_a_head(toy):
    n = len(toy.tokens)
    whole = read(toy, ReadRequest("weights"))
    assert whole.indices.shape == (2, n, n) and whole.indices.dtype == np.uint8
    one = read(toy, ReadRequest("weights", heads=(1,), region=(2, 6, 0, 4), levels=whole.levels))
    np.testing.assert_array_equal(one.indices[0], whole.indices[1, 2:6, 0:4])  # a region keeps the colours


def test_a_request_is_a_key_and_a_bad_one_is_one_line(toy):
    assert ReadRequest("weights", pixels=(3, 4)) == ReadRequest("weights", pixels=(3, 4))
    assert len({ReadRequest("weights"), ReadRequest("weights"), ReadRequest("q")}) == 2
    for bad in ({"kind": "pixels"}, {"kind": "cell"}, {"kind": "cell", "cell": (1,)}):
        with pytest.raises(InputError):
            ReadRequest("weights", **bad)
    with pytest.raises(InputError, match="no stage 'nope'"):
        read(toy, ReadRequest("nope"))
