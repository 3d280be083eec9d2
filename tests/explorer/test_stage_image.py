"""Stage -> uint8 colour indices (no Qt): levels, masked cells, subsampling."""

import numpy as np
import pytest

from models.engine.colour_index import COLOURS, MASKED_INDEX, MAX_DISPLAY_SIDE, MIXED_OFFSET, NAN_INDEX
from models.engine.trace import Stage
from models.reads.picture import stage_image

TOP = COLOURS - 1


def _stage(array, name="scores", per_head=True):
    array = np.asarray(array, dtype=np.float32)
    rows, cols = array.shape[-2:]
    return Stage(name=name, title=name, formula="", description="", array=array,
                 row_labels=tuple(map(str, range(rows))), col_labels=tuple(map(str, range(cols))),
                 per_head=per_head)  # fmt: skip


def test_signed_matrix_is_symmetric_about_zero():
    image = stage_image(_stage([[[-1.0, 0.0], [0.5, 2.0]]]))
    assert image.levels == (-2.0, 2.0)
    assert image.data_range == (-1.0, 2.0)
    assert not image.sequential
    # -1 -> a quarter of the way, 0 -> the middle, 2 -> the top colour.
    np.testing.assert_array_equal(image.indices[0], np.rint((np.array([[-1, 0], [0.5, 2]]) + 2) / 4 * TOP))


def test_weights_use_fixed_zero_to_one_levels():
    image = stage_image(_stage([[[0.25, 0.75]]], name="weights"))
    assert image.sequential and image.levels == (0.0, 1.0)
    np.testing.assert_array_equal(image.indices[0], np.rint(np.array([[0.25, 0.75]]) * TOP))


def test_minus_infinity_gets_the_masked_index_and_is_counted():
    image = stage_image(_stage([[[1.0, -np.inf], [-np.inf, -1.0]]], name="masked"))
    assert image.masked_cells == 2
    assert image.data_range == (-1.0, 1.0)
    assert image.indices[0, 0, 1] == MASKED_INDEX and image.indices[0, 1, 0] == MASKED_INDEX
    assert image.indices[0, 0, 0] == TOP and image.indices[0, 1, 1] == 0


def test_two_dimensional_stage_becomes_one_plane():
    image = stage_image(_stage(np.zeros((3, 5)), name="output", per_head=False))
    assert image.indices.shape == (1, 3, 5)
    assert image.levels == (-1.0, 1.0)  # all zeros: a neutral range, no division by zero


@pytest.mark.parametrize("n", [MAX_DISPLAY_SIDE + 1, 2 * MAX_DISPLAY_SIDE])
def test_huge_matrices_are_reduced_for_display_only(n):
    array = np.random.default_rng(0).standard_normal((1, n, 3)).astype(np.float32)
    image = stage_image(_stage(array))
    assert image.indices.shape[1] <= MAX_DISPLAY_SIDE
    assert image.data_range == (float(array.min()), float(array.max()))  # exact, from every cell


def test_fit_to_data_maps_weights_from_zero_to_their_largest_value():
    weights = np.array([[[0.02, 0.05], [0.01, 0.04]]], dtype=np.float32)
    image = stage_image(_stage(weights, name="weights"), fit=True)
    assert image.fitted and image.levels == (0.0, float(weights.max()))
    assert image.indices[0, 0, 1] == TOP  # the largest weight gets the top colour
    np.testing.assert_array_equal(image.indices[0], np.rint(weights[0] / weights.max() * TOP))
    assert stage_image(_stage(weights, name="weights")).levels == (0.0, 1.0)  # the default stays 0..1


def test_fit_to_data_leaves_signed_stages_symmetric():
    array = [[[-1.0, 0.0], [0.5, 2.0]]]
    fitted, fixed = stage_image(_stage(array), fit=True), stage_image(_stage(array))
    assert fitted.levels == fixed.levels == (-2.0, 2.0)
    np.testing.assert_array_equal(fitted.indices, fixed.indices)


def test_a_previous_token_head_at_2048_tokens_keeps_its_diagonal_on_screen():
    # Regression: striding dropped every other row, and the (i, i−1) diagonal vanished.
    n = 2048
    weights = np.zeros((1, n, n), np.float32)
    weights[0, 0, 0] = 1.0
    weights[0, np.arange(1, n), np.arange(n - 1)] = 1.0
    image = stage_image(_stage(weights, name="weights"), max_side=512)
    assert image.indices.shape == (1, 512, 512) and image.step == (4, 4)
    diagonal = image.indices[0][np.arange(512), np.arange(512)]
    assert (diagonal == TOP).all()  # every block on the diagonal holds a weight of 1
    # peaks are enlarged to 3 × 3 pixels: a square around a diagonal pixel reaches two above it, no further
    assert image.indices[0][np.triu_indices(512, 3)].max() == 0


def test_a_padding_mask_on_every_other_key_shows_as_partly_masked_blocks():
    n = 2048
    scores = np.random.default_rng(1).standard_normal((1, n, n)).astype(np.float32)
    scores[:, :, 1::2] = -np.inf
    image = stage_image(_stage(scores, name="masked"), max_side=1024)
    plane = image.indices[0]
    assert image.masked_cells > 0
    # Every block mixes masked and visible keys: neither the masked grey nor a plain colour.
    assert ((plane >= MIXED_OFFSET) & (plane < MIXED_OFFSET + COLOURS)).all()


def test_a_nan_is_painted_in_its_own_colour_not_as_masked():
    image = stage_image(_stage([[[1.0, np.nan], [-np.inf, 0.0]]], name="masked"))
    assert image.indices[0, 0, 1] == NAN_INDEX and image.indices[0, 1, 0] == MASKED_INDEX
    assert image.nan_cells == 1


def test_log_scale_spreads_small_weights():
    weights = np.array([[[1e-4, 1e-2, 1.0]]], np.float32)
    image = stage_image(_stage(weights, name="weights"), fit="log")
    assert image.levels == pytest.approx((-4.0, 0.0))
    np.testing.assert_array_equal(image.indices[0, 0], np.rint(np.array([0.0, 0.5, 1.0]) * TOP))


def test_a_reduced_matrix_with_masked_and_nan_cells_keeps_the_exact_finite_range():
    array = np.random.default_rng(1).standard_normal((1, 2 * MAX_DISPLAY_SIDE + 3, 5)).astype(np.float32)
    array[0, ::7, 2] = -np.inf  # masked
    array[0, 11, 4] = np.nan
    finite = array[np.isfinite(array)]
    image = stage_image(_stage(array))
    assert image.indices.shape[1] <= MAX_DISPLAY_SIDE
    assert image.data_range == (float(finite.min()), float(finite.max()))


def test_a_large_weights_matrix_keeps_its_maximum_in_the_range():
    """Above 4 M cells a head the minimum of weights is not read (a second pass); the maximum
    was lost with it, and the range line said "no finite values"."""
    weights = np.random.default_rng(2).random((1, 2100, 2100), dtype=np.float32) * 0.5
    image = stage_image(_stage(weights, name="weights"))
    assert np.isnan(image.data_range[0]) and image.data_range[1] == float(weights.max())
