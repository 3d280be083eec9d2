"""Stage → Pin this run: the pinned run beside the current one, and their difference."""

import dataclasses

import numpy as np

from explorer.engine.compare import MAX_COMPARE_TOKENS, compare
from explorer.state import Inputs
from models.engine import pipeline
from models.files.export import read_trace_files, write_trace
from models.run_engine import toy_request

SMALL = Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8)  # as conftest.SMALL



def shown_comparison(window):
    """The comparison on screen, once the read thread has answered (explorer.jobs)."""
    assert window.jobs.wait_until_idle()
    return window.compare.comparison

def _exported(trace, folder):
    write_trace(trace, folder)
    return read_trace_files(folder)[1]


def _expected_delta(pinned, current, stage, head, tmp_path):
    tmp_path.mkdir(exist_ok=True)
    a = _exported(pinned, tmp_path / "pinned")[stage]
    b = _exported(current, tmp_path / "current")[stage]
    a, b = (a[head], b[head]) if a.ndim == 3 else (a, b)
    with np.errstate(invalid="ignore"):
        return np.where(a == b, np.float32(0), b - a)  # two equal cells (−∞ included): no change


def _pin_then(window, settle, **changes):
    assert window.compare.pin()
    pinned = window.state.display.trace
    window.state.update_inputs(**changes)
    settle(window)
    assert window.state.display.trace is not pinned  # a new run, the pinned one kept as it was
    return pinned, window.state.display.trace


def test_temperature_change_difference_equals_the_exports(make_window, settle, tmp_path):
    window = make_window()
    window.state.set_stage("weights")
    window.state.set_head(1)
    pinned, current = _pin_then(window, settle, temperature=2.0)
    shown = shown_comparison(window)
    assert shown.message == "" and shown.stage == "weights" and shown.head == 1
    expected = _expected_delta(pinned, current, "weights", 1, tmp_path)
    np.testing.assert_array_equal(shown.delta, expected)
    assert np.abs(expected).max() > 0
    r, c, value = shown.largest
    assert abs(value) == np.abs(expected).max() and value == expected[r, c]
    assert "largest Δ" in window.compare.view.largest.text()
    assert "temperature 1.0 → 2.0" in window.compare.view.heading.text()
    assert window.compare.view.isVisible()


def test_sentence_change_follows_the_stepper(make_window, settle, tmp_path):
    window = make_window()
    window.state.set_stage("scores")
    pinned, current = _pin_then(window, settle, sentence="The dog sat on the rug.")  # as many tokens
    head = window.state.focus_head  # all heads shown: the focused one is compared
    np.testing.assert_array_equal(shown_comparison(window).delta,
                                  _expected_delta(pinned, current, "scores", head, tmp_path))  # fmt: skip
    window.state.step(+1)  # the compare panel steps with the window
    assert shown_comparison(window).stage == window.state.stage_name == "scaled"
    np.testing.assert_array_equal(shown_comparison(window).delta,
                                  _expected_delta(pinned, current, "scaled", head, tmp_path / "2"))  # fmt: skip
    window.state.set_stage("output")  # a stage without heads
    np.testing.assert_array_equal(shown_comparison(window).delta,
                                  _expected_delta(pinned, current, "output", 0, tmp_path / "3"))  # fmt: skip


def test_shape_mismatch_is_reported_without_a_difference(make_window, settle):
    window = make_window()
    window.state.set_stage("weights")
    _pin_then(window, settle, sentence="A much longer sentence than the one we had before it.")
    shown = shown_comparison(window)
    assert shown.delta is None and shown.difference is None
    assert shown.message.startswith("shapes differ: pinned 2×7×7, current 2×12×12")
    assert shown.pinned is not None and shown.current is not None  # still side by side
    view = window.compare.view
    assert view.message.text().startswith("shapes differ") and not view.plots[2].plot.isVisible()
    window.state.update_inputs(heads=4)  # another head count, on a stage without heads: same shape again
    settle(window)
    window.state.set_stage("input")
    assert shown_comparison(window).message.startswith("shapes differ")  # still another length


def test_unpin_closes_the_panel_and_stops_comparing(make_window, settle):
    window = make_window()
    window.registry.execute("stage.pin")
    assert window.compare.view.isVisible() and window.menus.qaction("stage.unpin").isEnabled()
    window.registry.execute("stage.unpin")
    assert not window.compare.view.isVisible() and window.compare.pinned is None
    window.state.update_inputs(seed=3)
    settle(window)
    assert shown_comparison(window) is None
    assert window.menus.qaction("stage.pin").shortcut().toString() == "Ctrl+K"
    assert not window.registry.is_enabled("stage.unpin") and not window.menus.qaction("stage.unpin").isEnabled()


def test_beyond_the_token_limit_it_says_so():
    long = dataclasses.replace(SMALL, sentence=" ".join(["a"] * (MAX_COMPARE_TOKENS + 1)))
    trace = pipeline.run(toy_request(long.to_runspec()))
    shown = compare(trace, trace, "weights", 0)
    assert shown.delta is None and str(MAX_COMPARE_TOKENS) in shown.message


def test_the_comparison_is_read_off_the_gui_thread(make_window, settle, no_stage_reads_on_gui_thread):
    # Two heads of up to 2048² cells and their difference: the GUI thread only paints the answer.
    window = make_window()
    window.state.set_stage("weights")
    _pin_then(window, settle, temperature=2.0)
    reads = no_stage_reads_on_gui_thread()
    window.state.compare.set_shown(None)
    window.compare.refresh()
    assert window.compare.comparison is None  # not computed in this turn: asked for
    assert shown_comparison(window).stage == "weights" and shown_comparison(window).delta is not None
    no_stage_reads_on_gui_thread.disarm()  # the window's own turns after the test may read again
    assert reads and not any(on_gui for _what, on_gui in reads)


def test_the_comparison_is_reduced_to_the_device_pixels_it_is_drawn_on(qtbot, make_window, settle):
    # It was reduced to 512 pixels a side and Qt scaled that down again to the ~300 on screen,
    # dropping the peaks the reduction had kept.
    long = " ".join(f"w{i}" for i in range(700))
    window = make_window(Inputs(sentence=long, heads=2, d_model=8, mask="causal"))
    window.state.set_stage("weights")
    _pin_then(window, settle, temperature=2.0)
    view = window.compare.view
    qtbot.waitUntil(lambda: view.device_side() is not None)
    window.compare.refresh()

    def fits() -> bool:  # the window may still be laying out: it reduces again when its plots resize
        shown, (rows, cols) = shown_comparison(window), view.device_side()
        return all(rows // 2 < image.indices.shape[-2] <= rows and cols // 2 < image.indices.shape[-1] <= cols
                   for image in (shown.pinned, shown.current, shown.difference))  # fmt: skip

    qtbot.waitUntil(fits, timeout=10_000)
    # The matrices' area shrinks while the window keeps its size (wider margins around them): the
    # comparison was reduced again only when the window itself was resized (a CI run caught it).
    before = view.device_side()
    view.canvas.ci.layout.setContentsMargins(150, 0, 150, 0)  # the plots get 300 px less width
    qtbot.waitUntil(lambda: view.device_side() != before, timeout=5_000)
    qtbot.waitUntil(fits, timeout=10_000)


def test_the_comparison_names_its_axes_and_for_cross_attention_which_sentence(qtbot):
    """The compare plots are titled as the main view's: query i / key j, with the sentence each
    comes from in cross-attention."""
    from explorer.widgets.compare_view import CompareView
    from models.config import AttentionConfig, AttentionRequest
    from models.engine.pipeline import run

    config = AttentionConfig(heads=1, d_model=8)
    plain = run(AttentionRequest(config=config, sentence="The cat sat."))
    cross = run(AttentionRequest(config=config, sentence="The cat sat.", cross_sentence="Die Katze."))
    view = CompareView()
    qtbot.addWidget(view)
    for pinned, current, rows, cols in ((plain, plain, "query i", "key j"),
                                        (cross, cross, "query i (2nd sentence)", "key j (1st sentence)")):  # fmt: skip
        comparison = compare(pinned, current, "weights", 0)
        assert comparison.current_axes[:2] == ("query", "key")
        view.show_comparison(comparison, "nothing")
        for plot in view.plots:
            assert (plot.left.labelText, plot.bottom.labelText) == (rows, cols)
    view.show_comparison(compare(plain, plain, "embeddings", 0), "nothing")  # a per-token stage
    assert (view.plots[0].left.labelText, view.plots[0].bottom.labelText) == ("token", "feature")
