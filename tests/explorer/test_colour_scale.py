"""The weights' colour scale ("0 to 1" / "fit to data"), the plot pool and the first focused query."""

import numpy as np
from mouse import hover

from explorer.engine.worker import ComputeWorker
from explorer.files.persistence import load_fit_colours
from explorer.state import ALL_HEADS, Inputs, default_query
from explorer.widgets.matrix_view import format_value
from models.config import AttentionRequest
from models.engine.colour_index import COLOURS
from models.engine.pipeline import run

LONG = Inputs(sentence=" ".join(["the cat sat on a mat while dogs ran far"] * 4), heads=2, d_model=8)


def _wait_for_levels(qtbot, view, levels):
    qtbot.waitUntil(lambda: tuple(view.colour_bar.levels()) == levels)


def test_fit_to_data_rescales_the_weights_without_recomputing(qtbot, make_window, settle, no_mouse_rate_limit):
    calls = []

    def counting_run(request, should_stop):
        calls.append(request)
        return run(request, should_stop)

    window = make_window(LONG, stage="weights", worker=ComputeWorker({AttentionRequest: counting_run}))
    view, state = window.matrix_view, window.state
    assert view.colour_combo.currentText() == "auto: 0 to 1" and view.colour_combo.isEnabled()  # 40 keys
    assert tuple(view.colour_bar.levels()) == (0.0, 1.0)
    weights = state.display.trace["weights"].array
    top = float(weights.max())

    view.colour_combo.setCurrentIndex(2)  # "fit to data"
    assert state.fit_colours
    _wait_for_levels(qtbot, view, (0.0, top))
    assert len(calls) == 1  # converted again on the worker, not recomputed
    head, row, col = np.unravel_index(int(np.argmax(weights)), weights.shape)
    assert view.shown_indices()[head, row, col] == COLOURS - 1  # the largest weight: the top colour
    assert view.shown_indices().max() == COLOURS - 1
    np.testing.assert_array_equal(view.shown_values(), weights)  # the numbers are untouched
    hover(view, int(head), int(row), int(col))
    assert f"= <b>{format_value(weights[head, row, col])}</b>" in view.readout.text()  # exact, as always

    state.update_inputs(seed=7)  # a new trace arrives already fitted
    settle(window)
    new_top = float(state.display.trace["weights"].array.max())
    _wait_for_levels(qtbot, view, (0.0, new_top))

    view.colour_combo.setCurrentIndex(1)  # back to 0 to 1
    _wait_for_levels(qtbot, view, (0.0, 1.0))
    assert view.shown_indices().max() == round(new_top * (COLOURS - 1))


def test_signed_stages_keep_their_symmetric_levels(qtbot, make_window):
    window = make_window(LONG, stage="scores", fit_colours=True)
    view = window.matrix_view
    assert not view.colour_combo.isEnabled()  # signed stages always fit their data
    scores = window.state.display.trace["scores"].array
    bound = float(np.abs(scores).max())
    assert tuple(view.colour_bar.levels()) == (-bound, bound)


def test_the_colour_scale_persists(qtbot, make_window, settings):
    window = make_window(LONG, stage="weights")
    window.matrix_view.colour_combo.setCurrentIndex(2)
    window.close()
    assert load_fit_colours(settings)
    again = make_window(LONG, stage="weights")
    assert again.state.fit_colours and again.matrix_view.colour_combo.currentText() == "fit to data"
    top = float(again.state.display.trace["weights"].array.max())
    _wait_for_levels(qtbot, again.matrix_view, (0.0, top))
    assert make_window(LONG, persist=False).state.fit_colours == "auto"  # screenshots: chosen from the data


def test_plots_are_kept_when_the_heads_shrink_and_reused_when_they_grow(make_window, settle):
    window = make_window(Inputs(sentence="The cat sat.", heads=4, d_model=8), stage="weights")
    view = window.matrix_view
    assert window.state.head == ALL_HEADS
    four = list(view.plots)
    window.state.update_inputs(heads=2)
    settle(window)
    assert view.plots == four[:2]
    assert not any(p.plot.isVisible() for p in four[2:])  # hidden, kept for later
    assert all(p.plot.scene() is view.canvas.scene() for p in four)
    window.state.update_inputs(heads=4)
    settle(window)
    assert view.plots == four and all(p.plot.isVisible() for p in four)


def test_spare_plots_are_built_in_idle_time(qtbot, make_window):
    from explorer.window import IDLE_PLOTS

    view = make_window().matrix_view
    qtbot.waitUntil(lambda: len(view.grid.pool) >= IDLE_PLOTS)
    assert len(view.plots) == 2 and not view.grid.pool_timer.isActive()


def test_the_first_query_explained_is_the_last_word_not_a_special_token():
    assert default_query(("[CLS]", "the", "cat", "sat", "[SEP]")) == 3
    assert default_query(("<s>", "Hello", "world", "</s>")) == 2
    assert default_query(("the", "cat", "<|endoftext|>")) == 1
    assert default_query(("the", "cat")) == 1  # the toy tokens: the last one
    assert default_query(("[CLS]", "[SEP]")) == 1  # nothing else: the last one still
