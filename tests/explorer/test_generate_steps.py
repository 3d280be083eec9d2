"""A step of the Generate window's slider is cheap on the GUI thread (issue 21, stall <= 50 ms): its
frame is computed on the read thread, and painting it sets only what the step changed (no tick,
label, range or title rebuilt, no bar item made again, no axis widened for a narrower label)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from explorer.panels.generate_panel import GeneratePanel
from explorer.widgets.model_view import ModelView
from explorer.widgets.topk_bars import TopKBars, nice_top
from models.pretrained import load_model
from tests.explorer.test_generate_panel import PROMPT, decoder  # noqa: F401 - the shared decoder fixture


@pytest.fixture
def panel(qtbot, decoder):  # noqa: F811 - the fixture imported above
    p = GeneratePanel(lambda name: load_model(name, device="cpu"), str(decoder))
    qtbot.addWidget(p)
    p.resize(1400, 900)
    p.prompt_edit.setText(PROMPT)
    p.new_tokens.setValue(6)
    p.show()
    p.generate(now=True)
    assert p.view is not None, p.status.text()
    assert p.wait_until_shown()
    yield p
    p.worker.stop()
    p.jobs.shutdown()


def calls(monkeypatch, obj, name: str) -> list:
    """Record each call of ``obj.name`` (still made)."""
    seen = []
    original = getattr(obj, name)

    def spy(*args, **kwargs):
        seen.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(obj, name, spy)
    return seen


def test_a_step_is_computed_off_the_gui_thread(qtbot, panel, monkeypatch):
    from explorer.engine.generation_view import GenerationView

    threads = []
    for name in ("frame", "step_thumbnails"):
        original = getattr(GenerationView, name)

        def recording(self, *args, _original=original, _name=name):
            threads.append((_name, threading.current_thread() is threading.main_thread()))
            return _original(self, *args)

        monkeypatch.setattr(GenerationView, name, recording)
    with qtbot.waitSignal(panel.shown, check_params_cb=lambda step: step == 2):
        panel.slider.setValue(2)
    assert ("frame", False) in threads and ("step_thumbnails", False) in threads
    assert not any(on_gui for _name, on_gui in threads), threads
    assert panel.step_label.text().startswith("step 2 /")


def test_a_held_arrow_key_paints_only_the_latest_step(qtbot, panel):
    painted = []
    panel.shown.connect(painted.append)
    for step in (5, 4, 3, 2, 1):  # asked faster than the read thread answers
        panel.slider.setValue(step)
    assert panel.wait_until_shown()
    assert painted and painted[-1] == 1 and panel.step == 1
    assert painted == sorted(painted, reverse=True)  # an older step is never painted after a newer one


def test_a_step_sets_no_labels_ranges_or_titles(qtbot, panel, monkeypatch):
    matrix, bars = panel.matrix, panel.bars
    spies = {
        "matrix labels": calls(monkeypatch, matrix.left, "set_labels"),
        "matrix range": calls(monkeypatch, matrix.plot, "setRange"),
        "matrix title": calls(monkeypatch, matrix.plot, "setTitle"),
        "sink lines": calls(monkeypatch, matrix.sink_curve, "setData"),
        "lens ticks": calls(monkeypatch, panel.lens.plot.getAxis("left"), "setTicks"),
        "bars title": calls(monkeypatch, bars.plot, "setTitle"),
        "bars rows": calls(monkeypatch, bars.plot, "setYRange"),
        "bars item": calls(monkeypatch, bars.plot, "addItem"),
    }
    for step in (4, 3, 2):
        with qtbot.waitSignal(panel.shown, check_params_cb=lambda s, want=step: s == want):
            panel.slider.setValue(step)
    assert {what: len(seen) for what, seen in spies.items()} == dict.fromkeys(spies, 0)
    panel.choose_head(1, 2)  # another head: its title and its sink line, still no labels or range
    assert panel.wait_until_shown()
    assert [len(spies[k]) for k in ("matrix title", "sink lines", "matrix labels", "matrix range")] == [1, 1, 0, 0]
    assert spies["matrix title"][0][0] == "L1 H2"


def test_bars_set_ticks_only_when_the_labels_change(qtbot, monkeypatch):
    bars = TopKBars()
    qtbot.addWidget(bars)
    ticks = calls(monkeypatch, bars.plot.getAxis("left"), "setTicks")
    items = calls(monkeypatch, bars.plot, "addItem")
    bars.set_bars(["a", "b"], [0.6, 0.3], 0, title="Next token")
    bars.set_bars(["a", "b"], [0.6, 0.3], 1, title="Next token")  # only the chosen colour changed
    assert len(ticks) == 1 and len(items) == 1 and bars.chosen_row == 1
    bars.set_bars(["c", "d"], [0.5, 0.4], 0, title="Next token")  # new labels, same bars: one item kept
    assert len(ticks) == 2 and len(items) == 1
    assert bars.labels == ["c  0.500", "d  0.400"]
    np.testing.assert_allclose(bars.bars.opts["width"], [0.5, 0.4])
    bars.set_bars(["c"], [0.5], None, "x", 0.01)  # the chosen token outside the top-k: a row added
    assert bars.labels[-1] == "… x  0.010" and bars.chosen_row == 1


def test_the_bars_label_axis_only_widens(qtbot):
    bars = TopKBars()
    qtbot.addWidget(bars)
    bars.resize(400, 300)
    bars.show()
    qtbot.waitExposed(bars)
    left = bars.plot.getAxis("left")

    def width_after(tokens) -> float:
        bars.set_bars(tokens, [0.5] * len(tokens), 0)
        qtbot.wait(10)  # laid out
        return left.width()

    start = left.width()
    assert width_after(["a"]) == start  # a short label fits the room kept from the start
    wide = width_after(["a-rather-long-token"])
    assert wide > start
    assert width_after(["a"]) == wide  # narrower again: the layout is left as it is


def test_the_probability_axis_moves_in_round_steps():
    assert [nice_top(v) for v in (0.0, 0.05, 0.051, 0.11, 0.19, 0.21, 0.3, 0.99, 1.4)] == [
        0.05, 0.05, 0.1, 0.2, 0.2, 0.25, 0.5, 1.0, 1.0,
    ]  # fmt: skip


def test_model_view_set_layers_equals_each_layer_set_alone(qtbot):
    rng = np.random.default_rng(0)
    indices = rng.integers(0, 127, (3, 4, 9, 9), dtype=np.uint8)
    one, all_at_once = ModelView(), ModelView()
    for view in (one, all_at_once):
        qtbot.addWidget(view)
        view.set_shape(3, 4, 9, 9)
    for layer in range(3):
        one.set_layer(layer, indices=indices[layer])
    all_at_once.set_layers(indices)
    np.testing.assert_array_equal(all_at_once.mosaic.image, one.mosaic.image)
    assert all_at_once.painted_layers == 3
    with pytest.raises(ValueError):
        all_at_once.set_layers(indices[:2])


def test_the_bars_and_lens_are_painted_in_a_later_turn_than_the_head(qtbot, panel, monkeypatch):
    # Two shorter turns rather than one long one: input (a key, the mouse) is handled in between.
    order = []
    for name, obj, method in (("head", panel.matrix, "show_step"), ("bars", panel.bars, "set_bars"),
                              ("lens", panel.lens, "set_position")):  # fmt: skip
        original = getattr(obj, method)
        monkeypatch.setattr(obj, method, lambda *a, _o=original, _n=name, **k: (order.append(_n), _o(*a, **k))[1])
    original_paint = panel.paint_step

    def paint_step(frame):
        original_paint(frame)
        order.append("turn ends")

    monkeypatch.setattr(panel, "paint_step", paint_step)
    panel.slider.setValue(3)
    assert panel.wait_until_shown()
    assert order == ["head", "turn ends", "bars", "lens"]
    assert panel.bars.labels[0].startswith(panel.view.gen.steps[3].top_tokens[0])
