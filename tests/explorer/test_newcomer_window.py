"""Issue 35, "what a newcomer trips over": the window resized, stepped and clicked (each test failed
before its fix)."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QApplication

from explorer.state import Inputs

README = "The animal didn't cross the street because it was too tired."


def _settle_layout():
    for _ in range(3):
        QApplication.processEvents()


def test_clicking_a_cell_shows_its_derivation(make_window, settle):
    """Item 11: at 1400×900 the inspector was 60-70 px tall after a click (its heading and half a
    formula line) until the divider was dragged."""
    for width, height in ((1400, 900), (1920, 1050)):
        window = make_window(Inputs(sentence=README, heads=2, d_model=16, mask="causal"), stage="weights")
        window.resize(width, height)
        settle(window)
        window.select_cell(1, 9, 1)
        assert window.jobs.wait_until_idle()
        _settle_layout()
        inspector = window.inspector.inspector
        assert inspector.derivation is not None
        area = window.inspector_scroll
        shown = area.viewport().height()
        # the title, the formula with its numbers and the explanation are on screen without scrolling
        bottom = inspector.steps.mapTo(window.inspector, inspector.steps.rect().bottomLeft()).y()
        assert bottom - area.verticalScrollBar().value() <= shown, (width, height, shown, bottom)
        assert shown >= 300, (width, height, shown)


def test_the_inspector_screenshot_waits_for_the_derivation_and_shows_it_whole(make_window, qtbot):
    """Item 3: ``--view inspector`` was ready before the derivation arrived (the inspector still
    hidden), and the same command gave 1400 × 900 with a sliver of inspector or 1400 × 1374."""
    from explorer.files.view_shots import open_view

    sizes = []
    for _ in range(2):
        window = make_window(Inputs(sentence=README, heads=2, d_model=16, mask="causal"), stage="weights")
        window.resize(1400, 900)
        _settle_layout()
        shot = open_view(window, "inspector", (1, 9, 1), None)
        assert not shot.ready()  # the derivation is computed off the GUI thread: not there yet
        qtbot.waitUntil(lambda shot=shot, window=window: shot.ready() and window.is_settled(), timeout=10_000)
        _settle_layout()
        area = window.inspector_scroll
        assert window.inspector.inspector.derivation is not None
        assert area.verticalScrollBar().maximum() == 0  # the whole derivation, no scroll bar
        sizes.append((window.width(), window.height(), window.right_splitter.sizes()))
    assert sizes[0] == sizes[1]


def _outlined(view):
    """(head, row, col) of the selection outline on screen, or None."""
    shown = [(plot.head, outline.rect()) for plot in view.plots
             if (outline := view.selection.outlines.get(id(plot))) is not None and outline.isVisible()]  # fmt: skip
    assert len(shown) <= 1
    return None if not shown else (shown[0][0], int(shown[0][1].y()), int(shown[0][1].x()))


def test_the_cell_outline_and_the_inspector_agree_after_a_stage_change(qtbot, make_window):
    """Item 13: click weights column 7 with 4 heads, step to Head outputs and back: the outline sat on
    column 3 (clamped to Head outputs' 4 columns and kept), the inspector said 7; on Value norms the
    query's row was reused as a head."""
    from mouse import cell_point
    from PySide6.QtCore import Qt

    window = make_window(Inputs(sentence=README, heads=4, d_model=16, mask="causal"), stage="weights")
    view = window.matrix_view
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 1, 9, 7))
    assert window.jobs.wait_until_idle()
    assert tuple(window.inspector.inspector.derivation.cell) == (1, 9, 7)
    assert _outlined(view) == (1, 9, 7)
    for stage in ("head_output", "value_norms", "weights"):
        window.state.set_stage(stage)
        qtbot.waitUntil(lambda stage=stage: view.state.stepper.stage.name == stage and view.settled(), timeout=10_000)
        if stage != "weights":
            assert _outlined(view) is None, stage  # the cell explained is not on this stage
    assert _outlined(view) == (1, 9, 7)
    assert tuple(window.inspector.inspector.derivation.cell) == (1, 9, 7)


def test_heatmaps_fit_again_after_the_window_shrinks(qtbot, make_window, settle):
    """Item 12: 4 heads, Scores, numbers on; enlarged to 1920×1050, stepped away and back, shrunk to
    1400×900: heads 1 and 3 and the colour bar were cut at the right, with no scroll bar."""
    window = make_window(Inputs(sentence=README, heads=4, d_model=16, mask="causal"), stage="scores")
    view = window.matrix_view
    view.numbers.checkbox.setChecked(True)
    window.resize(1920, 1050)
    settle(window)
    qtbot.waitUntil(view.settled, timeout=10_000)
    for stage in ("weights", "scores"):
        window.state.set_stage(stage)
        qtbot.waitUntil(lambda stage=stage: view.state.stepper.stage.name == stage and view.settled(), timeout=10_000)
    window.resize(1400, 900)
    qtbot.waitUntil(view.settled, timeout=10_000)
    qtbot.wait(300)  # the resize's own pause (the grid is laid out again once resizing pauses)
    _settle_layout()
    canvas = view.canvas.viewport().rect()
    for item in [plot.plot.getViewBox() for plot in view.plots] + [view.colour_bar]:
        rect = view.canvas.mapFromScene(item.sceneBoundingRect()).boundingRect()
        assert canvas.contains(rect), (item, rect, canvas)


def test_the_atlas_boxes_show_whole_names_and_its_axes_are_never_rescaled(qtbot):
    """Item 14: the atlas's Scatter x/y boxes read "entropy_", "inductior"; empty plots showed
    "layer (x0.001)" from −500 to 500 before a run, and the scatter "induction (x0.001)"."""
    import numpy as np

    from explorer.panels.atlas_window import AtlasPanel
    from models.reads.atlas import COLUMNS, Atlas

    panel = AtlasPanel()
    qtbot.addWidget(panel)
    panel.resize(800, 600)  # the atlas window's size
    panel.show()
    qtbot.waitExposed(panel)
    _settle_layout()
    for plot in (panel.map_plot, panel.scatter_plot):
        for side in ("left", "bottom"):
            assert "x0.001" not in plot.getAxis(side).labelString()
    shape = (2, 4)
    cols = {"texts": np.full(shape, 5.0)} | {c: np.full(shape, 0.0003) for c in COLUMNS[3:]}
    panel.set_atlas(Atlas("tiny", 2, 4, 5, cols, best_line={}, best_value={}, best_text={}))
    panel.x_combo.setCurrentText("entropy_mean")
    panel.y_combo.setCurrentText("induction")
    _settle_layout()
    for combo in (panel.colour_combo, panel.x_combo, panel.y_combo):
        longest = max(combo.fontMetrics().horizontalAdvance(combo.itemText(i)) for i in range(combo.count()))
        assert combo.width() >= longest + 10, (combo.currentText(), combo.width(), longest)
    assert "x0.001" not in panel.scatter_plot.getAxis("left").labelString()


def test_the_hover_line_never_shows_the_last_stages_cell(qtbot, make_window):
    """Item 14: the hover line went stale after a stage change or an edit: it kept the old stage's
    cell and value until the mouse moved."""
    from mouse import hover

    from explorer.widgets.matrix_view import READOUT_HINT

    window = make_window(Inputs(sentence=README, heads=2, d_model=16, mask="causal"), stage="weights")
    view = window.matrix_view
    hover(view, 0, 3, 1)
    qtbot.waitUntil(lambda: "row 3" in view.readout.text() and "…" not in view.readout.text(), timeout=5_000)
    before = view.readout.text()
    window.state.set_stage("scores")
    qtbot.waitUntil(lambda: view.state.stepper.stage.name == "scores" and view.settled(), timeout=10_000)
    _settle_layout()
    after = view.readout.text()
    assert after != before
    value = str(np.float32(view.state.stepper.stage.head(0)[3, 1]))
    assert after == READOUT_HINT or value in after, after


def test_a_head_chosen_in_the_whole_model_window_brings_the_main_window_forward(qtbot, make_window, monkeypatch):
    """Item 14: clicking a head in the Whole model window changed the main window behind it without
    raising it."""
    window = make_window(Inputs(model="minilm", sentence="The cat sat on the mat."))
    raised = []
    monkeypatch.setattr(window, "raise_", lambda: raised.append("raise"))
    monkeypatch.setattr(window, "activateWindow", lambda: raised.append("activate"))
    survey = window.windows.open_survey(model=True)
    qtbot.addWidget(survey)
    survey.panel.head_chosen.emit(2, 5)
    assert window.state.inputs.layer == 2 and window.state.head == 5
    assert raised == ["raise", "activate"]


def test_the_pe_lens_says_whether_the_shown_run_uses_its_encoding(qtbot, make_window, settle):
    """Item 7: the lens drew the notes' sinusoids "over 60 positions (d = 32)" for MiniLM (learned
    positions, d 384) and the induction model (rotary) without a word, and for the toy with its
    positions off."""
    window = make_window(Inputs(sentence=README, heads=2, d_model=16))
    lens = window.windows.open_pe_lens()
    qtbot.addWidget(lens)
    assert "Positions are off" in lens.about.text() and lens.about.isVisibleTo(lens)
    window.state.update_inputs(pe=True)
    settle(window)
    assert window.windows.open_pe_lens().about.text().startswith("The encoding this run adds to X")
    for model, kind in (("minilm", "learned positions"), ("induction", "rotary positions")):
        window.state.update_inputs(model=model, sentence="the cat sat on the mat")
        settle(window, timeout=30_000)
        text = window.windows.open_pe_lens().about.text()  # issue 44 item 10: its own positions, shown
        assert f"{model} uses {kind}" in text and "illustration" not in text
