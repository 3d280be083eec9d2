"""models.engine.pixels: the block maximum keeps every peak, enlarged peaks stay where they are."""

import numpy as np

from models.engine.pixels import block_peaks, enlarge_peaks, reduce_row


def test_block_peaks_keep_a_lone_weight_and_say_the_step():
    a = np.zeros((1000, 1000), np.float32)
    a[700, 300] = 1.0
    small, step = block_peaks(a, 250, 125)
    assert step == (4, 8) and small.shape == (250, 125)
    assert small[175, 37] == 1.0 and small.sum() == 1.0


def test_reduce_row_keeps_the_one_key_of_weight_one():
    row = np.zeros(1000, np.float32)
    row[613] = 1.0
    bars, step = reduce_row(row, 300)
    assert step == 4 and bars.max() == 1.0 and bars[613 // 4] == 1.0


def test_enlarged_peaks_are_3_by_3_and_centred():
    x = np.zeros((9, 9), np.float32)
    x[4, 4] = 1.0
    out = enlarge_peaks(x, signed=False)
    assert (out[3:6, 3:6] == 1.0).all() and out.sum() == 9.0


def test_signed_peaks_keep_their_sign_and_masked_pixels_stay_masked():
    x = np.full((5, 5), 0.1, np.float32)
    x[2, 2] = -3.0
    x[0, 0] = -np.inf
    x[4, 4] = np.nan
    out = enlarge_peaks(x, signed=True)
    assert out[1, 1] == -3.0 and out[3, 3] == -3.0
    assert np.isneginf(out[0, 0]) and np.isnan(out[4, 4])
    assert np.isfinite(out[0, 1]) and np.isfinite(out[3, 4])


def _reference_enlarge(x: np.ndarray, signed: bool) -> np.ndarray:
    """Each pixel's 3 × 3 neighbourhood looked at one neighbour at a time (the plain definition)."""
    h, w = x.shape
    special = np.isnan(x) | np.isneginf(x)
    out = x.copy()
    for i in range(h):
        for j in range(w):
            if special[i, j]:
                continue
            near = x[max(0, i - 1) : i + 2, max(0, j - 1) : j + 2]
            near = near[~(np.isnan(near) | np.isneginf(near))]
            if signed:
                out[i, j] = max(near.min(), near.max(), key=lambda v: (abs(v), v < 0))
            else:
                out[i, j] = near.max()
    return out


def test_enlarged_peaks_are_each_pixels_most_extreme_neighbour():
    rng = np.random.default_rng(5)
    for shape in [(1, 1), (1, 6), (5, 1), (9, 13)]:
        x = rng.standard_normal(shape).astype(np.float32)
        x[rng.random(shape) < 0.1] = -np.inf
        x[rng.random(shape) < 0.05] = np.nan
        np.testing.assert_array_equal(enlarge_peaks(x, signed=True), _reference_enlarge(x, True))
        weights = np.abs(x)
        weights[~np.isfinite(weights)] = 0.0  # weights: never NaN or −∞
        np.testing.assert_array_equal(enlarge_peaks(weights, signed=False), _reference_enlarge(weights, False))
