"""The model view's thumbnails, read back from the screen: a head's strongest weight is the colour
map's top colour (never the NaN pink), a uniform head is one colour, peaks survive the reduction."""

import numpy as np
import pytest
from pixels import cell_centre, count_colour, grab, near

from explorer.images.thumbnails import thumbnail_indices
from explorer.widgets.colormaps import NAN_RGB, lookup_table
from explorer.widgets.model_view import ModelView
from models.engine.colour_index import COLOURS, NAN_INDEX

TOP = tuple(int(v) for v in lookup_table(True)[COLOURS - 1])  # viridis' yellow
BOTTOM = tuple(int(v) for v in lookup_table(True)[0])  # viridis' dark purple


def one_hot(n: int) -> np.ndarray:
    return np.eye(n, dtype=np.float32)[None]


def test_the_strongest_weight_is_the_top_colour_not_nan():
    indices = thumbnail_indices(one_hot(16), fit_each=True)
    assert indices[0, 3, 3] == COLOURS - 1
    assert indices[0, 3, 4] == 0
    assert not (indices == NAN_INDEX).any()
    uniform = thumbnail_indices(np.full((1, 16, 16), 1 / 16, np.float32), fit_each=True)
    assert (uniform == COLOURS - 1).all()
    uniform_unit = thumbnail_indices(np.full((1, 16, 16), 1 / 16, np.float32), fit_each=False)
    assert (uniform_unit == round((COLOURS - 1) / 16)).all()  # 1/16 of the way up, never washed grey


@pytest.fixture
def model_view(qtbot):
    view = ModelView()
    qtbot.addWidget(view)
    view.resize(700, 700)
    view.show()
    qtbot.waitExposed(view)
    return view


def _paint(view, qtbot, heads: np.ndarray):
    n = heads.shape[-1]
    view.set_shape(1, heads.shape[0], n, n)
    view.set_layer(0, heads)
    qtbot.wait(20)
    return grab(view.canvas)


def test_thumbnails_of_a_one_hot_and_a_uniform_head_on_screen(qtbot, model_view):
    n = 16
    heads = np.concatenate([one_hot(n), np.full((1, n, n), 1 / n, np.float32)])
    pixels = _paint(model_view, qtbot, heads)
    box = model_view.mosaic_plot.getViewBox()
    tile = model_view.tile[0]
    for i in range(n):  # the one-hot diagonal: yellow on the diagonal, dark beside it
        x, y = cell_centre(model_view.canvas, box, (i + 0.5) * tile / n - 0.5, (i + 0.5) * tile / n - 0.5)
        assert near(pixels[y, x], TOP), (i, pixels[y, x])
    x, y = cell_centre(model_view.canvas, box, tile * 0.2, tile * 0.8)
    assert near(pixels[y, x], BOTTOM)
    # the uniform head, fitted to its own maximum: all of it the top colour; nothing pink anywhere
    x, y = cell_centre(model_view.canvas, box, tile * 0.5, model_view.tile[1] + 3 + tile * 0.5)
    assert near(pixels[y, x], TOP)
    assert count_colour(pixels, NAN_RGB) == 0


def test_an_isolated_peak_in_a_1000_token_thumbnail_is_seen(qtbot, model_view):
    n = 1000
    heads = np.zeros((1, n, n), np.float32)
    heads[0, 700, 300] = 1.0
    heads[0, 10, 990] = 1.0
    pixels = _paint(model_view, qtbot, heads)
    assert count_colour(pixels, TOP) >= 2 * 9  # both peaks, each at least 3 × 3 pixels


def test_tile_side_is_the_largest_that_fits_the_device_pixels():
    from explorer.images.thumbnails import GAP, MAX_SIDE, MIN_SIDE, THUMB, tile_side

    for rows, cols, layers, heads in ((500, 800, 6, 12), (300, 300, 1, 2), (900, 900, 32, 32), (4000, 4000, 1, 1)):
        side = tile_side((rows, cols), layers, heads)
        assert MIN_SIDE <= side <= MAX_SIDE
        fits = layers * side + (layers - 1) * GAP <= rows and heads * side + (heads - 1) * GAP <= cols
        bigger = tile_side((rows, cols), layers, heads) + 1
        too_big = layers * bigger + (layers - 1) * GAP > rows or heads * bigger + (heads - 1) * GAP > cols
        assert (fits and too_big) or side in (MIN_SIDE, MAX_SIDE)
    assert tile_side(None, 6, 12) == THUMB


def test_thumbnails_are_made_at_the_views_device_pixels_and_again_after_a_resize(qtbot, model_view):
    """Issue 18: the model view's thumbnails are reduced to the device pixels they are drawn on (no
    second scaling by Qt), and made again when the view is resized."""
    n = 1000
    heads = np.zeros((2, n, n), np.float32)
    heads[:, 700, 300] = heads[:, 10, 990] = 1.0
    _paint(model_view, qtbot, heads)
    rows, cols = model_view.view_pixels()
    side = model_view.side
    assert side > 64  # bigger than the old fixed 64 pixels: this view has room for more
    assert side // 2 < model_view.tile[0] == model_view.tile[1] <= side  # 1000 cells by whole blocks
    assert 2 * side + 3 <= cols and side <= rows  # the mosaic fits its pixels: never scaled down
    with qtbot.waitSignal(model_view.side_changed, timeout=3000) as got:
        model_view.resize(380, 380)
    assert got.args[0] < side
    # what the survey panel does with the signal: thumbnails again at the new side
    _paint(model_view, qtbot, heads)
    assert model_view.side == got.args[0] and got.args[0] // 2 < model_view.tile[0] <= got.args[0]
    pixels = grab(model_view.canvas)
    assert count_colour(pixels, TOP) >= 4 * 9  # both peaks of both heads, each at least 3 × 3


@pytest.mark.parametrize("n", [12, 150])  # one cell per pixel, and 3 × 3 blocks with peaks enlarged
def test_all_heads_at_once_equal_each_head_alone(n):
    # Every head is converted in one call with its own top (speed: the Generate window's steps);
    # each must equal that head converted alone by stage_image.to_indices, the one colour layout.
    from models.engine.colour_index import to_indices
    from models.engine.pixels import block_peaks, enlarge_peaks

    rng = np.random.default_rng(3)
    a = (rng.random((5, n, n)) ** 4).astype(np.float32)
    a[1] = 0.0  # no weight above 0: scaled 0..1
    a[2, 0, 0] = np.nan
    a[3] *= 1e-7  # tiny weights, fitted to their own top
    for fit_each, tops in ((True, None), (False, None), (True, np.float32([0.5, 0.0, 2.0, 1e-3, np.nan]))):
        got = thumbnail_indices(a, fit_each, tops=tops)
        side = -(-n // -(-n // 64))  # the thumbnail's side: whole blocks of cells
        small, step = block_peaks(a, side, side)
        small = enlarge_peaks(small, signed=False) if step != (1, 1) else small
        for h in range(5):
            finite = small[h][np.isfinite(small[h])]
            top = 1.0 if not fit_each else float(finite.max()) if finite.size else 1.0
            top = float(tops[h]) if tops is not None else top
            top = top if top > 0 else 1.0
            want, _ = to_indices(small[h], None, (0.0, top), log=False)
            np.testing.assert_array_equal(got[h], want, err_msg=f"head {h}, fit_each {fit_each}, tops {tops}")
