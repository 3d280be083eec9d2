"""Hide or reveal a key with a click (Alt+click; Alt+Shift+click for the whole token)."""

import numpy as np
from mouse import cell_point
from PySide6.QtCore import Qt

from explorer.state import Inputs


def _alt_click(qtbot, window, plot, row, col, shift=False):
    view = window.matrix_view
    modifiers = Qt.KeyboardModifier.AltModifier
    if shift:
        modifiers |= Qt.KeyboardModifier.ShiftModifier
    window.resize(1400, 900)
    qtbot.wait(50)
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, modifiers, cell_point(view, plot, row, col))


def test_alt_click_hides_one_key_from_one_query_and_shows_it_again(qtbot, make_window, settle):
    window = make_window(Inputs(sentence="one two three four", heads=2, d_model=8, mask="causal"), stage="weights")
    _alt_click(qtbot, window, 0, 3, 1)
    settle(window)
    inputs, weights = window.state.inputs, window.state.display.trace["weights"].array
    assert inputs.mask == "custom"
    expected = np.triu(np.ones((4, 4), bool), 1)
    expected[3, 1] = True  # the causal mask, plus the key hidden by the click
    np.testing.assert_array_equal(np.array(inputs.painted_mask), expected)
    assert (weights[:, 3, 1] == 0).all() and (weights[:, 2, 1] > 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1, rtol=1e-6)
    _alt_click(qtbot, window, 0, 3, 1)  # again: shown again
    settle(window)
    assert (window.state.display.trace["weights"].array[:, 3, 1] > 0).all()


def test_alt_shift_click_hides_a_whole_token(qtbot, make_window, settle):
    window = make_window(Inputs(sentence="one two three four", heads=2, d_model=8), stage="weights")
    _alt_click(qtbot, window, 1, 2, 0, shift=True)
    settle(window)
    weights = window.state.display.trace["weights"].array
    assert (weights[:, :, 0] == 0).all() and (weights[:, :, 1:] > 0).all()
