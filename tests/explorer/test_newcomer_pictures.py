"""Issue 35, "what a newcomer trips over": the pictures (each test failed before its fix)."""

from __future__ import annotations

import explorer.widgets.labels as labels
from explorer.widgets.labels import display_text

MIXED = "Café naïve 東京は美しい مرحبا بالعالم 🎉👍🏽 São Paulo"


def test_running_text_keeps_its_spaces_and_lines_when_a_character_has_no_font(qapp, monkeypatch):
    """Item 1: with one undrawable character every space and newline of the inspector's text read
    ``U+0020`` / ``U+000A``; only the undrawable characters are code points."""
    monkeypatch.setattr(labels, "installed_font_covers", lambda cp: cp < 0x2E80)  # no CJK, no emoji
    shown = display_text("key 東京 (3)\nq · k = 1.5")
    assert shown == "key U+6771 U+4EAC (3)\nq · k = 1.5"
    assert "U+0020" not in display_text(MIXED) and "U+000A" not in display_text(MIXED + "\nnext")
    assert display_text("a東b") == "a U+6771 b"
    assert display_text("👍🏽 ok") == "U+1F44D U+1F3FD ok"


def test_tokens_that_look_like_html_are_shown_as_themselves(qtbot):
    """Item 2: the rollout's titles for ``<s>`` read ``'' by layer``, struck through; every title that
    pyqtgraph lays out as HTML shows such a token as its text."""
    import numpy as np

    from explorer.widgets.heatmap_plot import HeatmapPlot
    from explorer.widgets.rollout_view import RolloutView
    from explorer.widgets.topk_bars import TopKBars

    view = RolloutView()
    qtbot.addWidget(view)
    rollout = np.tile(np.eye(3, dtype=np.float32), (2, 1, 1))
    view.set_rollout(rollout, ("<s>", "a&b", "</w>"))
    view.choose(1, 0)
    assert view.rows_plot.titleLabel.item.toPlainText() == "'<s>' by layer"
    assert view.bars_plot.titleLabel.item.toPlainText() == "'<s>' after layer 1"
    view.choose(1, 1)
    assert view.rows_plot.titleLabel.item.toPlainText() == "'a&b' by layer"
    plot = HeatmapPlot(0)
    plot.set_title("Query <s> · head 0")
    assert plot.plot.titleLabel.item.toPlainText() == "Query <s> · head 0"
    bars = TopKBars()
    qtbot.addWidget(bars)
    bars.set_bars(["<s>", "a"], [0.6, 0.3], chosen=None, title="after <b>")
    assert bars.plot.getPlotItem().titleLabel.item.toPlainText() == "after <b>"


def _scale_bars(scene):
    import pyqtgraph as pg

    return [item for item in scene.items() if isinstance(item, pg.ColorBarItem)]


def test_every_colour_map_has_a_labelled_scale(qtbot):
    """Item 5: the rollout heatmaps and the Generate window's logit lens and head matrix had no colour
    scale; the model view's thumbnails and heat table had an unlabelled one."""
    import numpy as np

    from explorer.widgets.generated_matrix import GeneratedMatrix
    from explorer.widgets.lens_map import LensMap
    from explorer.widgets.model_view import ModelView
    from explorer.widgets.rollout_view import RolloutView

    rollout = RolloutView()
    qtbot.addWidget(rollout)
    r = np.tile(np.eye(3, dtype=np.float32) * 0.5, (2, 1, 1))
    rollout.set_rollout(r, ("<s>", "a", "b"))
    bars = _scale_bars(rollout.canvas.scene())
    assert len(bars) == 2 and all(bar.axis.labelText for bar in bars)
    assert {bar.levels() for bar in bars} == {(0.0, 0.5)}  # 0 to the largest, as the images
    lens = LensMap()
    qtbot.addWidget(lens)
    lens.set_lens(np.full((2, 2), 0.3), [["a", "b"], ["c", "d"]], ("x", "y"), prompt_length=1)
    (bar,) = _scale_bars(lens.plot.scene())
    assert bar.axis.labelText == "probability" and bar.levels() == (0.0, 1.0)
    matrix = GeneratedMatrix()
    qtbot.addWidget(matrix)
    matrix.set_sequence(("a", "b", "c"), prompt_length=2)
    matrix.show_step(np.zeros((3, 3), np.uint8), 0.75, np.zeros((3, 3), np.float32), 2, "L0 H0")
    (bar,) = _scale_bars(matrix.canvas.scene())
    assert bar.axis.labelText == "weight" and bar.levels() == (0.0, 0.75)
    model = ModelView()
    qtbot.addWidget(model)
    model.resize(800, 700)
    model.show()
    qtbot.waitExposed(model)
    model.set_shape(1, 2, 3, 3)
    model.set_metrics({"entropy": np.array([[0.5, 1.5]])})
    qtbot.waitUntil(lambda: model.colour_bar.axis.labelText == "entropy (nats)", timeout=2_000)
    assert all(bar.axis.labelText for bar in _scale_bars(model.canvas.scene()))
    model.resize(800, 260)  # a short row (the encoder-decoder window's): shorter labels, never overlapping
    qtbot.waitUntil(lambda: model.mosaic_bar.geometry().height() < 120, timeout=2_000)
    for bar in (model.mosaic_bar, model.colour_bar):
        if bar.axis.label.isVisible():
            width = bar.axis.label.boundingRect().width()
            assert width <= bar.geometry().height(), (bar.axis.labelText, width, bar.geometry().height())


def test_a_map_of_nearly_equal_values_looks_nearly_uniform(qtbot):
    """Item 5: "Heads coloured by entropy" spread 2.9304-2.9306 over the whole colour map; the scale
    spans at least 0.05 nats, and the title says so."""
    import numpy as np

    from explorer.widgets.model_view import ModelView

    model = ModelView()
    qtbot.addWidget(model)
    model.set_shape(1, 2, 3, 3)
    model.set_metrics({"entropy": np.array([[2.9304, 2.9306]])})
    low, high = model.colour_bar.levels()
    assert high - low >= 0.05 - 1e-12 and low <= 2.9304 and high >= 2.9306
    assert "scale 0.05 wide" in model.table_plot.titleLabel.text
    model.set_metrics({"entropy": np.array([[0.5, 1.5]])})
    assert model.colour_bar.levels() == (0.5, 1.5) and "wide" not in model.table_plot.titleLabel.text


def test_the_focused_row_is_outlined_outside_its_cells(qtbot, make_window, tmp_path):
    """Item 8: the focused row's outline (3 px black and 1 px white, centred on the row's edges) hid
    a row of small heatmaps (MiniLM's 12 heads: the row read as a blank band). Every pixel of the
    row's cells shows its colour; the outline is drawn just outside them."""
    import numpy as np
    from pixels import device_rect, grab, near
    from PySide6.QtCore import QRectF

    from explorer.state import Inputs
    from explorer.widgets.colormaps import lookup_table
    from models.engine.colour_index import COLOURS

    top = tuple(int(v) for v in lookup_table(True)[COLOURS - 1])
    n = 16
    np.save(tmp_path / "eye.npy", ~np.eye(n, dtype=bool))  # every query sees itself only: weight 1
    inputs = Inputs(sentence=" ".join(f"w{i}" for i in range(n)), heads=12, d_model=24, mask="custom",
                    mask_file=str(tmp_path / "eye.npy"))
    window = make_window(inputs, stage="weights")
    window.resize(1400, 900)
    view = window.matrix_view
    qtbot.waitUntil(lambda: view.state.stepper.stage is not None and view.settled(), timeout=30_000)
    row = 9
    window.state.set_query(row)
    qtbot.waitUntil(lambda: view.settled(), timeout=10_000)
    pixels = grab(view.canvas)
    for plot in view.plots:
        box = plot.plot.getViewBox()
        x0, y0, x1, y1 = device_rect(view.canvas, box, QRectF(row, row, 1, 1))
        assert y1 - y0 <= 12  # small heatmaps, as MiniLM's
        inside = pixels[y0 + 1 : y1 - 1, x0 + 1 : x1 - 1].reshape(-1, 3)
        assert all(near(p, top, 30) for p in inside), (plot.head, y1 - y0, inside.tolist())
        assert plot.row_marker.isVisible()
