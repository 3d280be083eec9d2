"""Views of a model with SmolLM2's shape, 30 layers × 9 heads (issue 47): no two labels an axis draws
overlap (their rectangles as pyqtgraph lays them out, ``AxisItem.generateDrawSpecs``), in the Generate
window (a random 30-layer word-level LLaMA, generated for real), the model view, the rollout and the
atlas map and the time machine's grid; the logit lens's title (and the time machine's) promises per-cell text
only when its cells show it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QRectF
from test_gui_pictures import drawn_specs

from explorer.engine.time_machine_data import TimeMachine
from explorer.panels.generate_panel import GeneratePanel
from explorer.panels.time_machine_window import TimeMachineWindow
from explorer.widgets.lens_map import LensMap
from explorer.widgets.model_view import ModelView
from explorer.widgets.rollout_view import RolloutView
from models.history.heads import HeadMatch
from models.history.integrity import Integrity
from models.history.table import History
from models.pretrained import load_model

LAYERS, HEADS = 30, 9
BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_generate.py"


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("bench_generate", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    folder = tmp_path_factory.mktemp("thirty")
    bench.write_decoder(folder, layers=LAYERS, d=36, heads=HEADS, ffn=48, words=bench.DEMO_WORDS, scale=0.35)
    return folder


def drawn_labels(axis: pg.AxisItem) -> list[tuple[str, object]]:
    """(text, rectangle) of every label ``axis`` draws side by side at its size now (a token axis's
    upright labels, given as an anchor and a length, are test_token_axis_pictures')."""
    return [(text, rect) for rect, _flags, text in drawn_specs(axis) if isinstance(rect, QRectF)]


def assert_no_overlap(scene) -> int:
    """Every axis of ``scene``: no two drawn labels overlap; how many labels were drawn."""
    count = 0
    for axis in [item for item in scene.items() if isinstance(item, pg.AxisItem) and item.isVisible()]:
        labels = drawn_labels(axis)
        count += len(labels)
        for i, (a, ra) in enumerate(labels):
            for b, rb in labels[i + 1 :]:
                assert not ra.intersects(rb), (axis.orientation, a, b, ra, rb)
    return count


def layer_labels(axis: pg.AxisItem) -> list[str]:
    return [text for text, _rect in drawn_labels(axis)]


def test_the_generate_window_at_thirty_layers(qtbot, decoder):
    panel = GeneratePanel(lambda name: load_model(name, device="cpu"), str(decoder))
    qtbot.addWidget(panel)
    panel.resize(1400, 900)
    panel.prompt_edit.setText("the cat sat on the mat and the dog")
    panel.new_tokens.setValue(6)
    panel.show()
    qtbot.waitExposed(panel)
    try:
        panel.generate(now=True)
        qtbot.waitUntil(lambda: panel.lens.shape == (LAYERS, 15), timeout=60_000)
        qtbot.wait(50)
        for scene in (panel.model_view.canvas.scene(), panel.lens.plot.scene(), panel.matrix.canvas.scene()):
            assert assert_no_overlap(scene) > 0
        lens_left = layer_labels(panel.lens.plot.getAxis("left"))
        assert lens_left[0] == "L0" and 2 <= len(lens_left) < LAYERS  # thinned, not dropped
        top = layer_labels(panel.model_view.table_plot.getAxis("top"))
        assert top[0] == "H0" and len(top) >= 2
        # 450 cells a few pixels tall: no text in them, and the title does not promise any
        assert not panel.lens.texts_shown
        assert "text" not in panel.lens.plot.getPlotItem().titleLabel.text
    finally:
        panel.worker.stop()


def test_the_model_view_and_the_rollout_at_thirty_layers(qtbot):
    model = ModelView()
    qtbot.addWidget(model)
    model.resize(700, 600)
    model.show()
    qtbot.waitExposed(model)
    model.set_shape(LAYERS, HEADS, 11, 11)
    model.set_metrics({"entropy": np.random.default_rng(0).random((LAYERS, HEADS))})
    qtbot.wait(50)
    assert assert_no_overlap(model.canvas.scene()) >= 4
    rollout = RolloutView()
    qtbot.addWidget(rollout)
    rollout.resize(700, 500)
    rollout.show()
    qtbot.waitExposed(rollout)
    rollout.set_rollout(np.tile(np.eye(11, dtype=np.float32), (LAYERS, 1, 1)), tuple(f"t{i}" for i in range(11)))
    qtbot.wait(50)
    assert assert_no_overlap(rollout.canvas.scene()) > 0
    assert layer_labels(rollout.rows_axes["left"])[0] == "L0"


def test_the_lens_writes_text_only_in_cells_it_fits(qtbot):
    lens = LensMap()
    qtbot.addWidget(lens)
    lens.resize(900, 400)
    lens.show()
    qtbot.waitExposed(lens)
    lens.set_lens(np.full((2, 4), 0.3), [["ab"] * 4, ["cd"] * 4], ("w", "x", "y", "z"), prompt_length=2)
    qtbot.waitUntil(lambda: lens.texts_shown, timeout=2_000)
    assert "text = that layer's top token" in lens.plot.getPlotItem().titleLabel.text
    lens.resize(900, 60)  # cells shorter than a line: the text goes, and the title says hover
    qtbot.waitUntil(lambda: not lens.texts_shown, timeout=2_000)
    assert "hover" in lens.plot.getPlotItem().titleLabel.text


def test_the_time_machine_grid_at_thirty_layers(qtbot, tmp_path):
    """Its L/H labels were setTicks: all 30 layer labels printed over each other; now thinned, and the
    cells' values (two lines where a head was renumbered) only where they fit."""
    rng = np.random.default_rng(0)
    steps = [100, 200, 300]
    match = np.tile(np.arange(HEADS), (LAYERS, 1))
    match[:, [0, 1]] = match[:, [1, 0]]  # heads 0 and 1 renumbered in every layer: "was H1"
    history = History(folder=tmp_path, steps=steps, integrity=Integrity({s: f"h{s}" for s in steps}, []), losses={},
                      detectors={"previous": rng.random((3, LAYERS, HEADS))},
                      matches=[HeadMatch(match, rng.random((LAYERS, HEADS)), "maps") for _ in steps[1:]])  # fmt: skip
    tm = TimeMachine(history, [tmp_path] * 3, "thirty", "a b c", layer=0, why_error="no cell")
    window = TimeMachineWindow(tm)
    qtbot.addWidget(window)
    window.resize(1100, 800)
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(50)
    assert assert_no_overlap(window.grid.scene()) > 0
    left = layer_labels(window.grid_plot.getAxis("left"))
    assert left[0] == "L0" and 2 <= len(left) < LAYERS  # thinned, not dropped
    assert layer_labels(window.grid_plot.getAxis("bottom"))[0] == "H0"
    assert not window.texts_shown and "colours only" in window.grid_plot.titleLabel.text
