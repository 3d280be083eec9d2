"""The window is a client of the front door (issue 46): every picture and number it shows is
``read(trace, ReadRequest)``, and the same call on a notebook's ``api.toy(...)`` makes the same one.

The notebook traces the toy again, in this process but on another thread count, so its floats may
differ from the window's in the last bits: numbers agree to 1e-5, colour indices to one step of the
127-colour map (a value on a rounding edge), and exactly where the window's own run is read."""

import numpy as np
import pytest

from explorer.state import Inputs
from explorer.widgets.zoom_regions import device_pixels
from models import api
from models.reads.read import ReadRequest, read

SENTENCE = "The cat sat on the mat."
SETTINGS = {"heads": 2, "d_model": 8, "mask": "causal"}


def same_picture(shown: np.ndarray, notebook: np.ndarray) -> None:
    assert shown.shape == notebook.shape
    assert np.abs(shown.astype(int) - notebook.astype(int)).max(initial=0) <= 1


def plot_rows(view, stage, indices: np.ndarray) -> np.ndarray:
    """The planes of ``indices`` the view's plots show, in their order (a 2-D stage: plane 0)."""
    return np.stack([indices[p.head if stage.per_head else 0] for p in view.plots])


@pytest.mark.parametrize("scale", ["auto", False, True, "log"])
def test_every_stage_the_window_paints_is_a_notebook_read(make_window, settle, scale):
    window = make_window(Inputs(sentence=SENTENCE, **SETTINGS), fit_colours=scale)
    state, view = window.state, window.matrix_view
    notebook = api.toy(SENTENCE, **SETTINGS)
    shown_run = state.display.trace
    assert notebook.stages == shown_run.names and notebook.tokens == tuple(shown_run.key_tokens)
    for name in notebook.stages:
        state.set_stage(name)
        settle(window)
        image, stage = state.display.images[name], state.stepper.stage
        asked = ReadRequest(name, pixels=image.pixels, scale=image.fitted)
        assert image.fitted == scale
        # the window's picture is the read of its own run, exactly ...
        np.testing.assert_array_equal(read(shown_run, asked).indices, image.indices)
        # ... what its plots paint, and what the notebook's trace makes with the same call
        np.testing.assert_array_equal(view.shown_indices(), plot_rows(view, stage, image.indices))
        made = read(notebook, asked)
        same_picture(image.indices, made.indices)
        np.testing.assert_allclose(made.levels, image.levels, rtol=1e-5, atol=1e-6)


def test_hover_rows_and_a_cells_number_are_notebook_reads(make_window, settle, qtbot):
    window = make_window(Inputs(sentence=SENTENCE, **SETTINGS), stage="weights")
    state, view = window.state, window.matrix_view
    notebook = api.toy(SENTENCE, **SETTINGS)
    n = len(notebook.tokens)
    for name in ("scores", "masked", "weights", "output"):
        state.set_stage(name)
        settle(window)
        heads = state.stepper.stage.heads
        wants = [(name, h, 0, n) for h in range(heads)]
        qtbot.waitUntil(lambda wants=wants: view.values.request("test", wants, lambda: None), timeout=10_000)
        for h in range(heads):
            rows = read(notebook, ReadRequest(name, "rows", heads=(h,), region=(1, n, 0, 0)))
            np.testing.assert_allclose(view.values.rows(name, h, 1, n), rows, rtol=1e-5, atol=1e-6)
            cell = (h, n - 1, 2) if state.stepper.stage.per_head else (n - 1, 2)
            value = read(notebook, ReadRequest(name, "cell", cell=cell))
            assert value == pytest.approx(view.values.value(name, h, n - 1, 2), rel=1e-5, abs=1e-6)
    # the focus panel's bars: the focused query's row of weights
    state.set_stage("weights")
    state.set_head(1)
    state.set_query(3)
    expected = read(notebook, ReadRequest("weights", "rows", heads=(state.focus_head,), region=(3, 4, 0, 0)))[0]
    panel = window.focus_panel
    qtbot.waitUntil(lambda: panel.weights_row is not None and len(panel.weights_row) == n
                    and np.allclose(panel.weights_row, expected, rtol=1e-5, atol=1e-6), timeout=10_000)  # fmt: skip


def test_a_zoomed_region_is_a_notebook_read_at_the_plots_pixels(make_window, qtbot):
    n = 600
    sentence = " ".join(f"w{i}" for i in range(n))
    window = make_window(Inputs(sentence=sentence, **SETTINGS), stage="weights", fit_colours=False)
    state, view = window.state, window.matrix_view
    qtbot.waitUntil(lambda: getattr(state.stepper.stage, "name", None) == "weights", timeout=60_000)
    notebook = api.toy(sentence, **SETTINGS)
    image, plot = state.display.images["weights"], view.plots[1]
    whole = read(notebook, ReadRequest("weights", pixels=image.pixels, scale=image.fitted))
    same_picture(image.indices, whole.indices)  # reduced to the plots' pixels: blocks' peaks
    plot.plot.getViewBox().setRange(xRange=(100, 180), yRange=(400, 470), padding=0)
    qtbot.waitUntil(lambda: plot.region is not None and plot.region[1] - plot.region[0] < 100, timeout=30_000)
    pixels = device_pixels(plot, view.canvas.devicePixelRatioF())
    asked = ReadRequest("weights", heads=(plot.head,), region=plot.region, pixels=pixels, scale=image.fitted,
                        levels=image.levels)  # fmt: skip
    np.testing.assert_array_equal(plot.image.image, read(state.display.trace, asked).indices[0])
    same_picture(plot.image.image, read(notebook, asked).indices[0])
