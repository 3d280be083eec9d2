"""Bursts of input make one request: superqt's qdebounced behind explorer.widgets.debounce."""

from explorer.widgets.debounce import Debounced


def test_a_burst_of_calls_runs_once_with_the_last_arguments(qtbot):
    from PySide6.QtCore import QObject

    parent, seen = QObject(), []
    call = Debounced(seen.append, 20, parent)
    for i in range(5):
        call(i)
    assert call.pending and seen == []
    qtbot.waitUntil(lambda: seen == [4], timeout=2_000)
    assert not call.pending
    qtbot.wait(60)
    assert seen == [4]  # once


def test_flush_runs_a_waiting_call_now_and_cancel_forgets_it(qtbot):
    from PySide6.QtCore import QObject

    parent, seen = QObject(), []
    call = Debounced(seen.append, 10_000, parent)
    call.flush()  # nothing waiting: nothing runs
    assert seen == []
    call("a")
    call.flush()
    assert seen == ["a"] and not call.pending
    call("b")
    call.cancel()
    assert not call.pending
    qtbot.wait(50)
    call.flush()
    assert seen == ["a"]


def test_typing_makes_one_request_once_the_typist_pauses(qtbot, make_window, settle):
    window = make_window()
    first = window.worker.latest_generation
    edit = window.sentence_panel.sentence_edit
    edit.clear()
    qtbot.keyClicks(edit, "Attention is all you need")  # 26 key strokes, no pause between them
    assert window.sentence_panel.is_typing() and not window.is_settled()
    assert window.worker.latest_generation == first  # nothing sent while typing
    settle(window)
    assert window.worker.latest_generation == first + 1  # one request for the whole sentence
    assert window.state.display.trace.key_tokens == ("Attention", "is", "all", "you", "need")


def test_flush_sends_typed_text_at_once(qtbot, make_window, settle):
    window = make_window()
    qtbot.keyClicks(window.sentence_panel.sentence_edit, " Then")
    window.sentence_panel.flush()
    assert not window.sentence_panel.is_typing()
    assert window.state.inputs.sentence == window.sentence_panel.sentence_edit.text() != "The cat sat on the mat."


def test_input_changes_in_one_turn_make_one_request(make_window, settle):
    window = make_window()
    first = window.worker.latest_generation
    window.state.update_inputs(heads=4)
    window.state.update_inputs(d_model=16)
    window.state.update_inputs(seed=3)
    assert window.worker.latest_generation == first and not window.is_settled()
    settle(window)
    assert window.worker.latest_generation == first + 1
    assert window.state.display.trace.config["heads"] == 4
