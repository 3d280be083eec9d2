"""Stepping through the stages (buttons, keys, list) and inspecting cells and one query."""

import numpy as np
from mouse import cell_point, hover
from PySide6.QtCore import Qt

from explorer.state import ALL_HEADS, Inputs
from explorer.widgets.matrix_view import MINUS_INFINITY
from explorer.widgets.stage_stepper import formula_line


def _shown_title(window):
    return window.stepper.title.text()


def test_buttons_step_through_every_stage_in_order(qtbot, make_window):
    window = make_window()
    names = window.state.display.trace.names
    window.state.step_to_end(last=False)
    seen = [window.state.stage_name]
    while window.stepper.next_button.isEnabled():
        qtbot.mouseClick(window.stepper.next_button, Qt.MouseButton.LeftButton)
        seen.append(window.state.stage_name)
        stage = window.state.display.trace[window.state.stage_name]
        window.matrix_view.flush()  # a new grid's images come a turn later
        assert _shown_title(window) == stage.title
        assert window.stepper.formula.text() == formula_line(stage)
        assert window.stepper.description.text() == stage.description
        assert window.state.stepper.stage.name == stage.name
        assert window.stage_list.list.currentRow() == names.index(stage.name)
    assert tuple(seen) == names
    while window.stepper.prev_button.isEnabled():
        qtbot.mouseClick(window.stepper.prev_button, Qt.MouseButton.LeftButton)
    assert window.state.stage_name == names[0]


def test_keys_step_even_when_the_matrix_view_has_focus(qtbot, make_window):
    window = make_window()
    names = window.state.display.trace.names
    window.activateWindow()
    canvas = window.matrix_view.canvas
    canvas.setFocus()
    qtbot.waitUntil(canvas.hasFocus)
    qtbot.keyClick(canvas, Qt.Key.Key_Home)
    assert window.state.stage_name == names[0]
    for expected in names[1:]:
        qtbot.keyClick(canvas, Qt.Key.Key_Right)
        assert window.state.stage_name == expected
    qtbot.keyClick(canvas, Qt.Key.Key_Right)  # stays at the end
    assert window.state.stage_name == names[-1]
    qtbot.keyClick(canvas, Qt.Key.Key_Left)
    assert window.state.stage_name == names[-2]
    qtbot.keyClick(canvas, Qt.Key.Key_Home)
    assert window.state.stage_name == names[0]
    qtbot.keyClick(canvas, Qt.Key.Key_End)
    assert window.state.stage_name == names[-1]
    window.matrix_view.flush()
    assert window.state.stepper.stage.name == names[-1]


def test_the_stage_list_is_clickable(qtbot, make_window):
    window = make_window()
    stage_list = window.stage_list.list
    row = window.state.display.trace.index("q")
    rect = stage_list.visualItemRect(stage_list.item(row))
    qtbot.mouseClick(stage_list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert window.state.stage_name == "q"
    window.matrix_view.flush()
    assert window.state.stepper.stage.name == "q"


def test_head_selector_shows_one_head_or_all(make_window):
    window = make_window()
    window.state.set_stage("weights")
    assert len(window.matrix_view.plots) == 2
    combo = window.matrix_view.head_combo
    assert [combo.itemText(i) for i in range(combo.count())] == ["All heads", "Head 0", "Head 1"]  # 0-based
    combo.activated.emit(2)
    assert window.state.head == 1
    window.matrix_view.flush()
    assert [p.head for p in window.matrix_view.plots] == [1]
    expected = window.state.display.trace["weights"].head(1)
    np.testing.assert_array_equal(window.matrix_view.shown_values()[0], expected)
    combo.activated.emit(0)
    window.matrix_view.flush()
    assert window.state.head == ALL_HEADS and len(window.matrix_view.plots) == 2


def test_hover_reads_the_exact_value_and_masked_cells(qtbot, make_window, no_mouse_rate_limit):
    window = make_window(Inputs(sentence="one two three four", heads=2, d_model=8, mask="causal"))
    view, trace = window.matrix_view, window.state.display.trace
    window.state.set_stage("scores")
    hover(view, 1, 2, 1)
    value = trace["scores"].head(1)[2, 1]
    assert str(np.float32(value)) in view.readout.text()
    assert "three" in view.readout.text() and "two" in view.readout.text() and "head 1" in view.readout.text()

    window.state.set_stage("masked")
    hover(view, 0, 0, 3)
    assert MINUS_INFINITY in view.readout.text()
    assert "masked" in view.range_label.text()

    window.state.set_stage("weights")
    hover(view, 0, 0, 3)
    assert "0.0 (masked)" in view.readout.text()


def test_clicking_a_row_focuses_that_query(qtbot, make_window):
    window = make_window(Inputs(sentence="one two three four", heads=2, d_model=8))
    view, trace = window.matrix_view, window.state.display.trace
    window.state.set_stage("weights")
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 1, 2, 0))
    assert window.state.query == 2 and window.state.focus_head == 1
    assert window.jobs.wait_until_idle()  # the focus's numbers are read off the GUI thread
    panel = window.focus_panel
    np.testing.assert_array_equal(panel.weights_row, trace["weights"].head(1)[2])
    assert "three" in panel.header.text() and "head 1" in panel.header.text()
    output = trace["head_output"].head(1)[2]
    assert f"{output[0]:.3f}" in panel.sum_text.text()
    # The marker outlines the focused row in every heatmap.
    assert all(p.row_marker.isVisible() for p in view.plots)


def test_stages_converted_lazily_appear_when_stepped_to(qtbot, make_window, monkeypatch):
    """Big traces send only the shown stage at first; every other one arrives when needed."""
    import explorer.engine.worker as worker_module

    monkeypatch.setattr(worker_module, "CONVERT_ALL_BELOW", 0)
    window = make_window()
    names = window.state.display.trace.names
    for name in reversed(names):
        window.state.set_stage(name)
        qtbot.waitUntil(lambda name=name: window.state.stepper.stage.name == name, timeout=10_000)
        np.testing.assert_array_equal(window.matrix_view.shown_values()[0],
                                      window.state.display.trace[name].head(0))  # fmt: skip


def test_the_formula_line_wraps_between_its_parts_never_inside_one(make_window):
    window = make_window(Inputs(sentence="The cat sat.", heads=2, d_model=8, score="general", pe=True), stage="scores")
    text = formula_line(window.state.display.trace["scores"])
    parts = text.split("      ")
    assert len(parts) == 3 and all(" " not in p for p in parts)  # spaces inside a part do not break
    assert parts[2] == "per\u00a0head,\u00a0×\u00a02"
