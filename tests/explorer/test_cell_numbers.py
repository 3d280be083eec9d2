"""Numbers in the cells, and the keyboard-selected cell (Ctrl+arrows, Enter explains it)."""

import numpy as np
import pytest
from mouse import cell_point
from PySide6.QtCore import Qt

from explorer.state import Inputs
from explorer.widgets.cell_numbers import BLACK, WHITE, cell_text, parse_cell_text, text_colour
from explorer.widgets.colormaps import lookup_table

FOUR = Inputs(sentence="one two three four", heads=2, d_model=8, mask="causal")


def _open(make_window, inputs=FOUR):
    """A window whose matrices have their real size. (In the offscreen tests the canvas's layout
    first keeps the width it had before the window was shown; a resize lays it out again, in a
    later turn: wait for it.)"""
    window = make_window(inputs)
    window.resize(1300, 850)
    window.matrix_view.flush()  # the new grid laid out and painted now, as napari's force_sync
    return window


def _texts(view):
    return [view.numbers.items[id(p)].texts() for p in view.plots]


def _wait_for_numbers(qtbot, view, cells=16):
    """The first layout of a new window resizes the plots after the result: numbers follow (debounced)."""
    qtbot.waitUntil(lambda: all(len(t) == cells for t in _texts(view)), timeout=3000)


def test_a_short_sentence_shows_every_value_in_its_cell(qtbot, make_window):
    window = _open(make_window)
    view = window.matrix_view
    _wait_for_numbers(qtbot, view)
    for name in ("masked", "weights"):
        window.state.set_stage(name)
        stage = view.state.stepper.stage
        assert stage.name == name and len(view.plots) == 2
        for plot, texts in zip(view.plots, _texts(view)):
            assert len(texts) == 16  # every cell of the 4 × 4 matrix
            for (row, col), text in texts.items():
                value = stage.cell(plot.head, row, col)
                assert text == cell_text(value)
                assert parse_cell_text(text) == pytest.approx(value, rel=5e-3, abs=1e-12)
    masked = view.numbers.items[id(view.plots[0])]
    window.state.set_stage("masked")
    assert masked.texts()[(0, 3)] == "−∞"  # causal: the first query cannot see the last key


def test_the_numbers_toggle_hides_and_shows_them(qtbot, make_window):
    window = _open(make_window)
    view = window.matrix_view
    _wait_for_numbers(qtbot, view)
    assert view.numbers.checkbox.isChecked()  # on by default when they fit
    view.numbers.checkbox.setChecked(False)
    assert all(not t for t in _texts(view))
    view.numbers.checkbox.setChecked(True)
    assert all(len(t) == 16 for t in _texts(view))


def test_a_long_sentence_shows_no_numbers_until_zoomed_in(qtbot, make_window):
    words = [f"w{i}" for i in range(300)]
    window = _open(make_window, Inputs(sentence=" ".join(words), heads=2, d_model=8))
    window.state.set_stage("scores")
    view = window.matrix_view
    assert view.state.stepper.stage.name == "scores"
    qtbot.wait(200)  # any pending (debounced) update done: still none
    assert all(not t for t in _texts(view))
    plot = view.plots[0]
    plot.plot.getViewBox().setRange(xRange=(10, 14), yRange=(20, 24), padding=0)  # 4 × 4 cells, large
    qtbot.waitUntil(lambda: len(_texts(view)[0]) > 0, timeout=3000)
    stage = view.state.stepper.stage
    for (row, col), text in _texts(view)[0].items():
        assert 20 <= row < 24 and 10 <= col < 14
        assert text == cell_text(stage.cell(plot.head, row, col))


@pytest.mark.parametrize("sequential", [True, False])
def test_text_is_white_on_the_darkest_colour_and_black_on_the_lightest(sequential):
    lut = lookup_table(sequential)
    luma = lut[:, :3].astype(float) @ np.array([0.299, 0.587, 0.114])
    assert text_colour(lut, int(np.argmin(luma))) == WHITE
    assert text_colour(lut, int(np.argmax(luma))) == BLACK


def test_each_number_is_readable_on_its_own_cell(qtbot, make_window):
    window = _open(make_window)
    window.state.set_stage("weights")
    view = window.matrix_view
    _wait_for_numbers(qtbot, view)
    lut = lookup_table(True)
    for plot in view.plots:
        for row, col, _text, colour in view.numbers.items[id(plot)].cells:
            index = int(plot.image.image[row, col])
            assert colour == text_colour(lut, index)
            contrast = abs(colour.lightness() - float(lut[index, :3].astype(float) @ [0.299, 0.587, 0.114]))
            assert contrast > 100


def test_keyboard_moves_the_selected_cell_and_enter_explains_it(qtbot, make_window):
    window = _open(make_window)
    window.state.set_stage("weights")
    view = window.matrix_view
    _wait_for_numbers(qtbot, view)
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 1, 1, 0))
    assert view.selection.cell == (1, 1, 0)
    outline = view.selection.outlines[id(view.plots[1])]
    assert outline.isVisible() and (outline.rect().x(), outline.rect().y()) == (0, 1)
    ctrl = Qt.KeyboardModifier.ControlModifier
    qtbot.keyClick(view.canvas, Qt.Key.Key_Down, ctrl)
    qtbot.keyClick(view.canvas, Qt.Key.Key_Down, ctrl)
    qtbot.keyClick(view.canvas, Qt.Key.Key_Right, ctrl)
    qtbot.keyClick(view.canvas, Qt.Key.Key_Down, ctrl)  # the last row: stays there
    assert view.selection.cell == (1, 3, 1)
    assert (outline.rect().x(), outline.rect().y()) == (1, 3)
    assert window.state.stage_name == "weights"  # Ctrl+arrows do not step the stages
    qtbot.keyClick(view.canvas, Qt.Key.Key_Return)
    assert window.jobs.wait_until_idle()
    d = window.inspector.inspector.derivation
    assert d is not None and d.stage == "weights" and tuple(d.cell) == (1, 3, 1)
    assert d.value == float(window.state.display.trace["weights"].head(1)[3, 1])
