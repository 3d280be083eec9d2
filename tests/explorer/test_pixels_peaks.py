"""The stepper's heatmap read back from the screen: isolated weights of 1 among 1000 and 4096
tokens are seen where they are, each at least 3 × 3 pixels; the range line says how many cells a
screen pixel holds; a one-hot diagonal and a uniform head paint the colours they should."""

import numpy as np
import pytest
from pixels import cell_centre, count_colour, device_rect, grab, near, square_of
from PySide6.QtCore import QRectF

from explorer.state import Inputs
from explorer.widgets.colormaps import lookup_table
from models.engine.colour_index import COLOURS

TOP = tuple(int(v) for v in lookup_table(True)[COLOURS - 1])
BOTTOM = tuple(int(v) for v in lookup_table(True)[0])


def _two_peaks(tmp_path, n: int, peaks) -> Inputs:
    mask = np.ones((n, n), dtype=bool)  # True = hidden: every cell but the peaks
    for r, c in peaks:
        mask[r, c] = False
    path = tmp_path / "mask.npy"
    np.save(path, mask)
    return Inputs(sentence=" ".join(f"w{i}" for i in range(n)), heads=1, d_model=4, mask="custom",
                  mask_file=str(path))


def _screen(window, qtbot):
    view = window.matrix_view
    qtbot.waitUntil(lambda: view.state.stepper.stage is not None and view.settled(), timeout=60_000)
    return view, grab(view.canvas)


@pytest.mark.parametrize("n, peaks", [(1000, [(700, 300), (10, 990)]), (4096, [(3000, 1200), (17, 4000)])])
def test_isolated_peaks_are_seen_where_they_are(qtbot, make_window, tmp_path, n, peaks):
    window = make_window(_two_peaks(tmp_path, n, peaks), stage="weights")
    view, pixels = _screen(window, qtbot)
    box = view.plots[0].plot.getViewBox()
    for r, c in peaks:
        x, y = cell_centre(view.canvas, box, r, c)
        assert square_of(pixels, x, y, TOP, size=3), (n, r, c, pixels[y - 2 : y + 3, x - 2 : x + 3].tolist())
    matrix = device_rect(view.canvas, box, QRectF(0, 0, n, n))
    assert count_colour(pixels, TOP, matrix) <= len(peaks) * 25  # and nowhere else in the matrix
    text = view.range_label.text()
    assert "1 screen pixel:" in text and "enlarged" in text, text


def test_the_range_line_says_how_many_cells_a_screen_pixel_holds(qtbot, make_window, tmp_path):
    window = make_window(_two_peaks(tmp_path, 1000, [(1, 1)]), stage="weights")
    view, _ = _screen(window, qtbot)
    box = view.plots[0].plot.getViewBox()
    rows, cols = -(-1000 // int(box.height())), -(-1000 // int(box.width()))
    assert f"{rows}×{cols} cells" in view.range_label.text()


def test_a_one_hot_diagonal_on_screen(qtbot, make_window, tmp_path):
    n = 12
    mask = ~np.eye(n, dtype=bool)
    np.save(tmp_path / "eye.npy", mask)
    inputs = Inputs(sentence=" ".join(f"w{i}" for i in range(n)), heads=1, d_model=4, mask="custom",
                    mask_file=str(tmp_path / "eye.npy"))
    window = make_window(inputs, stage="weights")
    view, pixels = _screen(window, qtbot)
    box = view.plots[0].plot.getViewBox()
    for i in range(n):  # read near a cell's corner: its number is written in the middle
        x, y = cell_centre(view.canvas, box, i - 0.35, i - 0.35)
        assert near(pixels[y, x], TOP)
        x, y = cell_centre(view.canvas, box, i - 0.35, (i + 5) % n - 0.35)
        assert near(pixels[y, x], BOTTOM)


def test_focus_bars_show_one_key_of_1000_with_weight_one(qtbot, make_window, tmp_path):
    from explorer.widgets.query_focus import BAR_BRUSH

    window = make_window(_two_peaks(tmp_path, 1000, [(700, 300), (10, 990)]), stage="weights")
    window.state.set_query(700)
    panel = window.focus_panel
    assert window.jobs.wait_until_idle()  # the query's weights, read off the GUI thread
    qtbot.wait(50)
    pixels = grab(panel.chart)
    box = panel.chart.getPlotItem().getViewBox()
    x, y = cell_centre(panel.chart, box, 0.0, 300)  # key 300 at half its bar's height (weight 0.5)
    bar = [xx for xx in range(pixels.shape[1]) if near(pixels[y, xx], BAR_BRUSH)]
    assert len(bar) >= 3, bar  # a bar at least 3 pixels wide
    assert abs(np.mean(bar) - x) <= 3  # where key 300 is


def test_the_focus_panel_fits_the_stage(make_window):
    from explorer.state import Inputs as In

    window = make_window(In(sentence="one two three four", heads=2, d_model=8, mask="causal"), stage="weights")
    panel, state = window.focus_panel, window.state
    state.set_query(2)
    assert window.jobs.wait_until_idle()  # the focus's numbers are read off the GUI thread
    assert panel.weights_row is not None and panel.vector is None  # query × key: the weights as bars
    state.set_stage("q")  # per token: the row's vector over its feature indices
    assert window.jobs.wait_until_idle()
    q = state.display.trace["q"]
    np.testing.assert_array_equal(panel.vector, q.rows(state.focus_head, 2, 3)[0])
    assert panel.axis.tickStrings([0.5, 1.5], 1.0, 1.0) == ["0", "1"] and "features" in panel.header.text()
    state.set_stage("output")  # the output: its vector and the decomposition Σ_j a_ij v_j
    assert window.jobs.wait_until_idle()
    assert panel.vector.shape == (state.display.trace["output"].shape[-1],)
    assert "Σ" in panel.sum_text.text()
    state.set_stage("scores")
    assert window.jobs.wait_until_idle()
    assert panel.vector is None and panel.weights_row is not None
