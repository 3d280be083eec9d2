"""The Why panel: a clicked score split into its sources, off the GUI thread, drawn as a signed table."""

import numpy as np
from mouse import cell_point
from PySide6.QtCore import Qt

from explorer.panels.why_panel import WhyPanel, fold
from explorer.state import Inputs

S = "k78lt2nxawscgzef4j1qh69ibu305ok78lt2nxawscgzef4j1qh69ibu305o"  # a block repeated (docs/why.md)


def test_clicking_a_score_splits_it_off_the_gui_thread(qtbot, make_window, no_stage_reads_on_gui_thread):
    window = make_window(Inputs(sentence="one two three four five", heads=2, d_model=8, mask="causal", pe=True))
    window.state.set_stage("scaled")
    qtbot.waitUntil(lambda: window.state.stepper.shown is not None and window.state.stepper.stage.name == "scaled")
    view, trace = window.matrix_view, window.state.display.trace
    reads = no_stage_reads_on_gui_thread()
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 1, 3, 2))
    assert window.jobs.wait_until_idle()
    assert window.why.panel.result is None  # the panel is closed: nothing is split for nobody
    window.registry.execute("view.why")  # File → Why…: the last clicked score, split
    qtbot.waitUntil(lambda: window.why.panel.result is not None)
    no_stage_reads_on_gui_thread.disarm()
    assert reads and not any(on_gui for _what, on_gui in reads)
    result = window.why.panel.result
    assert (result["head"], result["row"], result["col"]) == (1, 3, 2)
    assert result["query_sources"] == ["embed", "pos"] == result["key_sources"]
    score = float(trace["scaled"].head(1)[3, 2])
    assert result["score"] == score
    assert abs(np.sum(result["table"]) - score) <= 1e-5 * np.abs(result["table"]).sum()
    window.state.update_inputs(seed=3)  # a new trace: the old split's numbers are gone
    qtbot.waitUntil(lambda: window.why.panel.result is None)


def test_the_table_is_drawn_signed_with_totals_in_the_margins(qtbot):
    panel = WhyPanel()
    qtbot.addWidget(panel)
    table = np.array([[1.0, -3.0], [0.5, 2.0]])
    panel.show_result({"table": table.tolist(), "query_sources": ["embed", "L0 H1"], "key_sources": ["embed", "pos"],
                       "stage": "scaled", "head": 0, "row": 2, "col": 1, "layer": 1, "query_token": "a",
                       "key_token": "b", "score": 0.5, "relative_error": 0.0})  # fmt: skip
    np.testing.assert_array_equal(panel.image.image, table.astype(np.float32))
    assert panel.colour_bar.levels() == (-3.0, 3.0)  # symmetric: white is 0
    assert panel.margins == (["-2", "+2.5"], ["+1.5", "-1"])  # query-source totals right, key-source totals top
    assert "L0 H1" in panel.words.text() or "embed" in panel.words.text()
    with qtbot.waitSignal(panel.open_head) as signal:
        assert panel.open_source("L0 H1", "embed")  # the query source is a head: its row at the query
    assert signal.args == [0, 1, 2, "query"]
    with qtbot.waitSignal(panel.open_head) as signal:
        assert panel.open_source("embed", "L3 H0")  # else the key source's head, at the key
    assert signal.args == [3, 0, 1, "key"]
    assert not panel.open_source("embed", "pos")


def test_many_sources_fold_into_others_and_still_add_up():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(40, 30))
    names = [f"s{i}" for i in range(40)]
    kept, folded = fold(names, table, 0, most=10)
    assert len(kept) == 10 and kept[-1] == "31 others" and folded.shape == (10, 30)
    np.testing.assert_allclose(folded.sum(0), table.sum(0))


def test_a_head_source_opens_that_heads_row(qtbot, make_window):
    window = make_window(Inputs(model="induction", sentence=S, layer=1))
    window.why.open()
    display = window.state.display
    window.why.panel.show_cell(display, display.trace["scaled"], 0, 40, 11, window.why.model_of(display))
    assert window.jobs.wait_until_idle()
    qtbot.waitUntil(lambda: window.why.panel.result is not None)
    assert "L0 H0" in window.why.panel.result["key_sources"]
    window.why.panel.open_source("embed", "L0 H0")  # the previous-token head, at the key's position
    qtbot.waitUntil(lambda: window.state.display.trace.config["layer"] == 0, timeout=15_000)
    assert window.state.stage_name == "weights" and window.state.focus_head == 0 and window.state.query == 11


def test_the_dock_opens_wide_enough_to_read_its_table(qtbot, make_window, settle):
    """In a real window the dock first took the ~120 px Qt gives a new dock: the table was a sliver
    until the user dragged it. It opens at a readable width, and a width the user chose is kept."""
    window = make_window(Inputs(sentence="one two three four five", heads=2, d_model=8))
    window.resize(1400, 900)
    settle(window)
    dock = window.why.open()
    qtbot.waitUntil(lambda: dock.width() >= 400, timeout=3000)
    assert dock.width() <= window.width() // 2 + 20


def test_the_row_split_says_which_terms_work_for_the_top_key_and_which_against(qtbot):
    """Issue 44, item 11: "carried most by:" listed the largest terms whatever their sign, so terms
    working against the margin read as its carriers."""
    panel = WhyPanel()
    qtbot.addWidget(panel)
    split = {"top_key": 1, "top_token": "b", "query_token": "a", "margin": 0.3, "query_sources": ["embed", "pos"],
             "key_sources": ["embed", "pos"], "table": [[0.5, -0.9], [0.6, 0.1]]}  # fmt: skip
    panel.show_result({"table": [[1.0, 0.0], [0.0, 0.0]], "query_sources": ["embed", "pos"],
                       "key_sources": ["embed", "pos"], "stage": "scaled", "head": 0, "row": 2, "col": 1,
                       "layer": None, "query_token": "a", "key_token": "b", "score": 1.0, "relative_error": 0.0,
                       "row_split": split})  # fmt: skip
    text = panel.words.text()
    assert "carried most by" not in text
    text = text[text.index("Why key 1 'b' and not the others"):]
    pro, con = text.index("For it:"), text.index("Against it:")
    assert pro < text.index("pos wrote at 'a' meets what embed") < con  # +0.6
    assert con < text.index("embed wrote at 'a' meets what pos") and "-0.9" in text[con:]


def test_the_cells_numbers_are_written_only_where_every_one_fits(qtbot):
    """Issue 44 point 6, in a real window: a 7 × 7 table in the Why dock at its opening width wrote
    "+0.0065-0.00304-0.00765" across cells; now three digits when all fit, none when they do not."""
    panel = WhyPanel()
    qtbot.addWidget(panel)
    table = np.random.default_rng(0).normal(scale=0.01, size=(7, 7))
    names = [f"s{i}" for i in range(7)]
    panel.show_result({"table": table.tolist(), "query_sources": names, "key_sources": names, "stage": "scaled",
                       "head": 0, "row": 2, "col": 1, "layer": 1, "query_token": "a", "key_token": "b",
                       "score": float(table.sum()), "relative_error": 0.0})  # fmt: skip
    assert len(panel.numbers) == 49
    for width, fit in ((560, False), (1500, True)):
        panel.resize(width, 700)
        panel.show()
        qtbot.wait(50)
        cell = panel.plot.vb.width() / 7
        widest = max(item.textItem.boundingRect().width() for item in panel.numbers)
        assert all(item.isVisible() == fit for item in panel.numbers), (width, cell, widest)
        if fit:
            assert widest < cell
