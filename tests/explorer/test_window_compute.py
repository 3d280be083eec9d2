"""Inputs in the window -> the engine -> exactly the engine's numbers in the views."""

import random

import numpy as np
from PySide6.QtCore import Qt

from explorer.state import ALL_HEADS
from models.engine.pipeline import run
from models.reads.picture import stage_image
from models.run_engine import toy_request


def assert_view_matches_engine(window):
    """The matrices on screen are the engine's for the current inputs, values and colours."""
    state, view = window.state, window.matrix_view
    expected = run(toy_request(state.inputs.to_runspec()))
    stage = expected[state.stage_name]
    heads = range(stage.heads) if state.head == ALL_HEADS else [state.head]
    view.flush()  # a new grid's images come a turn later
    assert view.state.stepper.stage.name == stage.name
    np.testing.assert_array_equal(view.shown_values(), np.stack([stage.head(h) for h in heads]))
    np.testing.assert_array_equal(view.shown_indices(), stage_image(stage).indices[list(heads)])
    assert window.state.display.trace.key_tokens == expected.key_tokens


def test_typing_a_sentence_shows_its_matrices(qtbot, make_window, settle):
    window = make_window()
    edit = window.sentence_panel.sentence_edit
    edit.clear()
    qtbot.keyClicks(edit, "Attention is all you need")
    settle(window)
    assert window.state.inputs.sentence == "Attention is all you need"
    assert window.state.display.trace.key_tokens == ("Attention", "is", "all", "you", "need")
    assert_view_matches_engine(window)
    assert not window.status_line.is_error
    assert "5 tokens" in window.status_line.text()


def test_example_sentences_are_offered_and_computed(qtbot, make_window, settle):
    window = make_window()
    combo = window.sentence_panel.examples
    assert combo.count() > 3
    combo.activated.emit(2)
    settle(window)
    assert window.state.inputs.sentence == combo.itemText(2)
    assert_view_matches_engine(window)


def test_changing_heads_mask_score_and_pe_updates_the_views(make_window, settle):
    window = make_window()
    panel = window.settings_panel
    panel.heads.setValue(4)
    settle(window)
    assert window.state.display.trace["weights"].heads == 4
    assert len(window.matrix_view.plots) == 4
    assert_view_matches_engine(window)

    panel.mask.setCurrentText("causal")
    settle(window)
    assert "masked" in window.state.display.trace
    weights = window.state.display.trace["weights"].array
    assert np.all(np.triu(weights, k=1) == 0)  # nothing after the query
    assert_view_matches_engine(window)

    panel.score.setCurrentIndex(panel.score.findData("additive"))
    settle(window)
    assert window.state.display.trace.config["score"] == "additive"
    assert_view_matches_engine(window)

    panel.pe.setChecked(True)
    settle(window)
    assert "positional_encoding" in window.state.display.trace
    window.state.set_stage("positional_encoding")
    assert_view_matches_engine(window)


def test_padding_mask_hides_the_clicked_key(make_window, settle):
    window = make_window()
    panel = window.settings_panel
    panel.mask.setCurrentText("padding")
    assert panel.pad_picker.isVisible()
    picker = panel.pad_picker
    assert picker.count() == len(window.state.key_tokens)
    # Every token shows its check box, unchecked (not only the ones whose state changed).
    assert [picker.item(i).data(Qt.ItemDataRole.CheckStateRole) for i in range(picker.count())] == \
        [Qt.CheckState.Unchecked.value] * picker.count()  # fmt: skip
    picker.itemClicked.emit(picker.item(2))  # a click on key token 2
    settle(window)
    assert window.state.inputs.pad_positions == (2,)
    weights = window.state.display.trace["weights"].array
    assert np.all(weights[:, :, 2] == 0)
    assert_view_matches_engine(window)


def test_cross_attention_uses_the_second_sentence_for_queries(qtbot, make_window, settle):
    window = make_window()
    window.sentence_panel.cross_check.setChecked(True)
    edit = window.sentence_panel.cross_edit
    edit.clear()
    qtbot.keyClicks(edit, "Die Katze")
    settle(window)
    trace = window.state.display.trace
    assert trace.query_tokens == ("Die", "Katze")
    assert trace["weights"].array.shape[1:] == (2, len(trace.key_tokens))
    assert_view_matches_engine(window)


def test_invalid_settings_are_refused_at_the_control(make_window, settle):
    window = make_window()
    panel = window.settings_panel
    before = window.worker.latest_generation
    panel.d_model.setValue(9)  # 9 is not divisible by 2 heads, d_k is auto
    settle(window)
    assert window.worker.latest_generation == before  # nothing sent to the engine
    assert panel.problem.isVisibleTo(panel) and "divisible" in panel.problem.text()
    assert panel.d_model.property("invalid") and panel.heads.property("invalid")
    assert "divisible" in panel.d_model.toolTip()
    panel.d_k.setValue(3)  # an explicit d_k makes it valid again
    settle(window)
    assert not panel.problem.isVisibleTo(panel) and not panel.d_model.property("invalid")
    assert window.state.display.trace["q"].array.shape[-1] == 3
    assert_view_matches_engine(window)


def test_an_empty_sentence_is_reported_and_a_later_one_recovers(qtbot, make_window, settle):
    window = make_window()
    window.sentence_panel.sentence_edit.clear()
    settle(window)
    assert window.status_line.is_error and "empty" in window.status_line.text()
    assert window.isVisible()
    qtbot.keyClicks(window.sentence_panel.sentence_edit, "Hello again")
    settle(window)
    assert not window.status_line.is_error
    assert window.state.display.trace.key_tokens == ("Hello", "again")
    assert_view_matches_engine(window)


def test_a_burst_of_random_edits_ends_on_the_last_request(qtbot, make_window, settle):
    window = make_window()
    rng = random.Random(3)
    panel, words = window.settings_panel, ["cat", "dog", "sat", "the", "mat", "ran", "far", "."]
    for i in range(200):
        what = rng.randrange(6)
        if what == 0:
            window.state.update_inputs(sentence=" ".join(rng.choices(words, k=rng.randint(1, 12))))
        elif what == 1:
            panel.heads.setValue(rng.choice([1, 2, 4]))
        elif what == 2:
            panel.mask.setCurrentText(rng.choice(["none", "causal"]))
        elif what == 3:
            panel.score.setCurrentIndex(rng.randrange(4))
        elif what == 4:
            panel.seed.setValue(rng.randrange(1000))
        else:
            panel.pe.setChecked(not panel.pe.isChecked())
        if i % 7 == 0:
            qtbot.wait(1)  # let the event loop run now and then, as a real user's edits would
    settle(window)
    assert window.state.display.generation == window.worker.latest_generation
    for name in ("scores", "weights", "output"):
        window.state.set_stage(name)
        assert_view_matches_engine(window)


def test_status_bar_names_device_and_time(make_window):
    window = make_window()
    text = window.status_line.text()
    assert "cpu" in text and " ms" in text
    assert window.settings_panel.device.text() == "cpu"


def test_sentence_line_edit_keeps_left_and_right(qtbot, make_window):
    window = make_window()
    edit = window.sentence_panel.sentence_edit
    window.activateWindow()
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus)
    edit.setCursorPosition(5)
    stage = window.state.stage_name
    qtbot.keyClick(edit, Qt.Key.Key_Left)
    assert edit.cursorPosition() == 4
    qtbot.keyClick(edit, Qt.Key.Key_Right)
    qtbot.keyClick(edit, Qt.Key.Key_Right)
    assert edit.cursorPosition() == 6
    assert window.state.stage_name == stage  # the keys moved the cursor, not the stage


def test_a_longer_range_text_never_resizes_the_heatmaps(qtbot, make_window):
    """The range line changes with every result; its length must not widen the centre column
    (which re-laid out and repainted every heatmap: the 40–130 ms stalls of a seed change)."""
    window = make_window()
    window.resize(1400, 900)
    qtbot.wait(50)
    before = window.matrix_view.canvas.size()
    label = window.matrix_view.range_label
    label.setText(label.text() + "   " + "min −1234.5678   max 9876.5432   " * 8)
    qtbot.wait(50)
    assert window.matrix_view.canvas.size() == before
    window.matrix_view.refresh()
    assert label.toolTip() == label.text() != ""  # all of it on hover when the row is too narrow


def test_a_result_with_more_heads_than_built_heatmaps_waits_for_them(qtbot, make_window, settle, monkeypatch):
    """Building a heatmap takes a few ms: never several inside the result's turn (a first model's
    load stalled 50–60 ms so). They are built one per turn, then the result shows, complete."""
    import inspect

    import explorer.widgets.heatmap_grid as heatmap_grid

    window = make_window()
    view = window.matrix_view
    built, ticks = [], []  # (idle ticks before it, result-handling callers) of each heatmap built
    plot_class = heatmap_grid.HeatmapPlot

    def build(*args, **kwargs):
        built.append((len(ticks), {f.function for f in inspect.stack()} & {"show_trace", "refresh", "build_now"}))
        return plot_class(*args, **kwargs)

    monkeypatch.setattr(heatmap_grid, "HeatmapPlot", build)
    view.grid.pool_timer.timeout.connect(lambda: ticks.append(1))  # after the grid's own slot, in the same tick
    heads = len(view.grid.pool) + 3
    window.state.update_inputs(heads=heads, d_model=8 * heads)
    settle(window)
    assert len(built) >= 3 and all(callers == set() for _tick, callers in built)  # none in a result's turn
    assert len({tick for tick, _callers in built}) == len(built)  # one per idle tick, alone
    assert len(view.plots) == heads and view.state.stepper.generation == window.worker.latest_generation
    assert_view_matches_engine(window)


def test_no_stale_preparing_line_once_the_heatmaps_show(make_window, settle):
    """The readout said "Preparing 2 heatmaps…" under the painted heatmaps until the mouse moved."""
    window = make_window()  # a new window builds its first heatmaps while the first result waits
    settle(window)
    view = window.matrix_view
    assert view.readout.text().startswith("Hover")
    view.readout.setText("Preparing weights…")  # as while a big stage's image is on its way
    view.refresh()
    assert not view.readout.text().startswith("Preparing")
