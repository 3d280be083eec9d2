"""Long rows show their structure by default: the colour scale is chosen from the data (log10 once
rows hold more than a few hundred keys), the colour box says so, a person's own choice is kept."""

import numpy as np
from pixels import device_rect, grab
from PySide6.QtCore import QRectF

from explorer.files.persistence import load_fit_colours
from explorer.state import Inputs
from models.engine.colour_index import LOG_ABOVE_KEYS

LONG = Inputs(sentence=" ".join(f"w{i}" for i in range(512)), heads=1, d_model=8, mask="causal")
SHORT = Inputs(sentence="The cat sat on the mat.", heads=1, d_model=8)


def _distinct_colours(view) -> int:
    qt_box = view.plots[0].plot.getViewBox()
    x0, y0, x1, y1 = device_rect(view.canvas, qt_box, QRectF(0, 0, view.plots[0].cols, view.plots[0].rows))
    pixels = grab(view.canvas)[y0 + 2 : y1 - 2, x0 + 2 : x1 - 2]
    return len(np.unique(pixels.reshape(-1, 3), axis=0))


def test_a_long_input_opens_on_the_log_scale_and_says_so(qtbot, make_window):
    assert 512 > LOG_ABOVE_KEYS
    window = make_window(LONG, stage="weights", persist=False)
    view = window.matrix_view
    qtbot.waitUntil(lambda: view.settled(), timeout=30_000)
    image = window.state.display.images["weights"]
    assert window.state.fit_colours == "auto" and image.scale == "log"
    assert view.colour_combo.currentText().startswith("auto: log")
    assert _distinct_colours(view) > 20  # structure, not a flat purple square


def test_a_short_input_stays_on_0_to_1(make_window):
    window = make_window(SHORT, stage="weights", persist=False)
    assert window.state.display.images["weights"].scale == "unit"
    assert window.matrix_view.colour_combo.currentText() == "auto: 0 to 1"
    assert tuple(window.matrix_view.colour_bar.levels()) == (0.0, 1.0)


def test_the_persons_own_choice_is_kept(qtbot, make_window, settings):
    window = make_window(LONG, stage="weights")
    window.matrix_view.colour_combo.setCurrentIndex(1)  # "0 to 1", chosen
    qtbot.waitUntil(lambda: window.state.display.images["weights"].scale == "unit", timeout=30_000)
    window.close()
    assert load_fit_colours(settings) is False
    again = make_window(LONG, stage="weights")
    assert again.state.fit_colours is False and again.state.display.images["weights"].scale == "unit"


def test_on_the_log_scale_a_weight_of_one_is_the_top_colour_even_when_all_weights_are_alike():
    from models.engine.colour_index import COLOURS, colour_levels, to_indices
    from models.engine.trace import Stage

    stage = Stage("weights", "", "", "", np.zeros((1, 2, 2), np.float32), ("a", "b"), ("a", "b"), per_head=True)
    levels = colour_levels(stage, 1.0, 1.0, "log")
    indices, _ = to_indices(np.array([[1.0, 0.0]], np.float32), None, levels, log=True)
    assert indices[0, 0] == COLOURS - 1 and indices[0, 1] == 0


def test_the_colour_box_shows_every_text_whole_and_keeps_its_width(make_window):
    # "auto: 0 to 1" was cut to "auto: 0 to"; a box sized to its texts must not widen the window either.
    from PySide6.QtWidgets import QStyle, QStyleOptionComboBox

    from explorer.widgets.matrix_view import AUTO_TEXT, COLOUR_SCALES

    window = make_window()
    combo = window.matrix_view.colour_combo
    option = QStyleOptionComboBox()
    combo.initStyleOption(option)
    field = combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                         QStyle.SubControl.SC_ComboBoxEditField, combo)  # fmt: skip
    width = combo.width()
    for text in (*COLOUR_SCALES, *AUTO_TEXT.values()):
        assert combo.fontMetrics().horizontalAdvance(text) <= field.width(), text
    combo.setItemText(0, AUTO_TEXT["log"])
    assert combo.width() == width and window.width() <= 1400
