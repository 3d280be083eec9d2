"""The whole-model panel: click a thumbnail -> head_chosen, sort the metrics table, the special-token
toggle changes the metrics as the formulas say, layers painted as they arrive, files opened."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from explorer.images.thumbnails import thumbnail_indices
from explorer.panels.survey_panel import SurveyPanel, open_attention_window
from models.engine.colour_index import COLOURS
from models.engine.pixels import block_peaks
from models.pretrained import load_model
from models.reads.survey import METRIC_NAMES, head_metrics

SENTENCE = "The cat sat on the mat."


@pytest.fixture(scope="module")
def minilm():
    return load_model("minilm", device="cpu")


@pytest.fixture
def panel(qtbot):
    p = SurveyPanel()
    qtbot.addWidget(p)
    p.resize(1200, 700)
    p.show()
    yield p
    p.worker.stop()


def computed(qtbot, panel, model, sentence=SENTENCE):
    with qtbot.waitSignal(panel.survey_shown, timeout=60_000):
        panel.compute(model, sentence)
    return panel.survey


def test_layers_arrive_then_metrics_and_rollout(qtbot, panel, minilm):
    arrived = []
    panel.worker.layer_ready.connect(lambda g, layer, a, t: arrived.append(layer))
    survey = computed(qtbot, panel, minilm)
    assert arrived == list(range(6)) and panel.model_view.painted_layers == 6
    assert survey.weights.shape[:2] == (6, 12) and survey.rollout.shape[0] == 6
    assert panel.table.model.rowCount() == 72 and panel.rollout_view.rollout is not None
    assert panel.message.isHidden()


def test_click_on_a_thumbnail_chooses_that_layer_and_head(qtbot, panel, minilm):
    computed(qtbot, panel, minilm)
    qtbot.wait(10)
    view = panel.model_view
    for layer, head in ((0, 0), (3, 7), (5, 11)):
        pixel = view.canvas.mapFromScene(view.scene_pos_of(layer, head))
        with qtbot.waitSignal(panel.head_chosen, timeout=2000) as got:
            qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pixel))
        assert got.args == [layer, head]
    assert view.describe(3, 7).startswith("layer 3 · head 7")


def test_sorting_the_table(qtbot, panel, minilm):
    survey = computed(qtbot, panel, minilm)
    panel.table.sort_by("previous", descending=True)
    rows = panel.table.shown_rows()
    values = [survey.metrics["previous"][layer, head] for layer, head in rows]
    assert values == sorted(values, reverse=True) and len(rows) == 72
    panel.table.sort_by("entropy", descending=False)
    values = [survey.metrics["entropy"][l, h] for l, h in panel.table.shown_rows()]  # noqa: E741
    assert values == sorted(values)
    top = panel.table.shown_rows()[0]
    with qtbot.waitSignal(panel.head_chosen) as got:
        panel.table.view.clicked.emit(panel.table.proxy.index(0, 3))
    assert tuple(got.args) == top


def test_special_token_toggle_recomputes_the_metrics_by_the_formulas(qtbot, panel, minilm):
    survey = computed(qtbot, panel, minilm)
    assert survey.query_tokens[0] == "[CLS]" and survey.query_tokens[-1] == "[SEP]"
    before = {name: panel.table.model.values[:, i].copy() for i, name in enumerate(panel.table.model.names)}
    panel.special_box.setChecked(True)
    assert panel.wait_until_shown()  # the kept tokens' metrics and thumbnails, made on the read thread
    sub = survey.weights[:, :, 1:-1, 1:-1]  # [CLS] and [SEP] rows and key columns dropped
    expected = head_metrics(sub)
    # sink stays the weight on the sequence's own first token ([CLS], left out) over the rows kept
    expected["sink"] = survey.weights[:, :, 1:-1, 0].astype(np.float64).mean(-1)
    for i, name in enumerate(METRIC_NAMES):
        np.testing.assert_allclose(panel.table.model.values[:, i], expected[name].reshape(-1), atol=1e-12)
        assert not np.allclose(before[name], expected[name].reshape(-1))
    # e.g. 'first' is now the weight on "the", the first token kept; rows are not renormalised
    np.testing.assert_allclose(expected["first"], sub[..., :, 0].astype(np.float64).mean(-1), atol=1e-12)
    n = len(survey.query_tokens) - 2
    assert panel.rollout_view.rollout.shape == (6, n, n) and panel.rollout_view.tokens[0] == "the"
    assert panel.model_view.tile == (n, n)
    panel.special_box.setChecked(False)
    np.testing.assert_allclose(panel.table.model.values[:, 0], before["entropy"])


def test_a_newer_request_wins(qtbot, panel, minilm):
    panel.compute(minilm, "A first sentence that will be replaced before it finishes.")
    with qtbot.waitSignal(panel.survey_shown, timeout=60_000) as got:
        panel.compute(minilm, SENTENCE)
    assert got.args[0].query_tokens == tuple(minilm.encode(SENTENCE).tokens)
    qtbot.waitUntil(lambda: not panel.busy, timeout=60_000)
    assert panel.survey.query_tokens == tuple(minilm.encode(SENTENCE).tokens)


def test_open_attention_shows_warnings_and_errors(qtbot, panel, tmp_path):
    a = np.full((2, 3, 4, 4), 0.25, dtype=np.float32)
    a[0, 0, 0, 0] = 0.9
    np.savez(tmp_path / "a.npz", attention=a, tokens=np.array(["<s>", "x", "y", "z"]))
    assert panel.open_attention(tmp_path / "a.npz")
    assert "do not sum to 1" in panel.message.text() and panel.message.isVisible()
    assert panel.table.model.rowCount() == 6 and panel.survey.rollout.shape == (2, 4, 4)
    np.savetxt(tmp_path / "bad.npy", [1.0])
    assert not panel.open_attention(tmp_path / "bad.npy")
    assert panel.message.text().startswith("error: cannot read")


def test_cross_attention_file_has_no_rollout(qtbot, panel, tmp_path):
    np.save(tmp_path / "cross.npy", np.full((2, 3, 5), 0.2))
    assert panel.open_attention(tmp_path / "cross.npy")
    assert panel.rollout_view.rollout is None and "square" in panel.rollout_view.message.text()
    assert not panel.special_box.isEnabled()
    assert panel.table.model.data(panel.table.model.index(0, 4)) == "—"  # self: NaN


def test_open_attention_window(qtbot, tmp_path):
    np.save(tmp_path / "w.npy", np.full((4, 4), 0.25))
    window = open_attention_window(None, tmp_path / "w.npy")
    qtbot.addWidget(window)
    assert window.isVisible() and window.panel.survey.weights.shape == (1, 1, 4, 4)


def test_block_max_keeps_every_peak():
    a = np.zeros((1, 300, 300), np.float32)
    a[0, 123, 271] = 1.0  # a lone peak that striding by 5 would drop
    small, step = block_peaks(a, 64, 64)
    assert step == (5, 5)
    assert small.shape == (1, 60, 60) and small.max() == 1.0 and small[0, 123 // 5, 271 // 5] == 1.0
    idx = thumbnail_indices(a)
    assert idx.dtype == np.uint8 and idx.max() == COLOURS - 1  # the colour map's top, not the NaN index


def test_main_attention_option(qtbot, tmp_path, capsys):
    from explorer.app import run_app

    np.save(tmp_path / "w.npy", np.full((2, 3, 4, 4), 0.25))
    shot = tmp_path / "shot.png"
    assert run_app(["--attention", str(tmp_path / "w.npy"), "--screenshot", str(shot)]) == 0
    assert shot.stat().st_size > 1000
    (tmp_path / "bad.npy").write_bytes(b"junk")
    assert run_app(["--attention", str(tmp_path / "bad.npy"), "--screenshot", str(shot)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: cannot read attention file") and len(err) == 1


def test_window_whole_model_click_opens_the_layer_and_head(qtbot, make_window, tmp_path):
    from explorer.state import Inputs

    window = make_window(Inputs(sentence=SENTENCE, model="minilm"), persist=False)
    survey = window.windows.open_survey(model=True)
    qtbot.addWidget(survey)
    qtbot.waitUntil(lambda: survey.panel.survey is not None, timeout=60_000)
    survey.panel.head_chosen.emit(4, 9)
    assert window.state.inputs.layer == 4 and window.state.head == 9
    np.save(tmp_path / "w.npy", np.full((4, 4), 0.25))
    opened = window.windows.open_survey(path=tmp_path / "w.npy")
    assert opened.panel.survey.weights.shape == (1, 1, 4, 4)


def test_toggle_while_layers_stream_repaints_at_the_end(qtbot, panel, minilm):
    panel.worker.layer_ready.connect(lambda *args: panel.special_box.setChecked(True))
    survey = computed(qtbot, panel, minilm, "A dog barked at the moon.")
    assert panel.wait_until_shown()
    n = len(survey.query_tokens) - 2
    assert panel.model_view.tile == (n, n) and panel.model_view.painted_layers == 6


def test_every_metrics_title_is_shown_whole(qtbot):
    """'max_weight' was cut to 'ax_weig' when the columns shared the width equally."""
    from explorer.widgets.head_metrics_table import HeadMetricsTable
    from models.reads.survey import METRIC_NAMES

    table = HeadMetricsTable()
    qtbot.addWidget(table)
    table.resize(420, 600)
    table.show()
    table.set_metrics({name: np.random.default_rng(0).random((2, 3)) for name in METRIC_NAMES})
    header = table.view.horizontalHeader()
    metrics = header.fontMetrics()
    for column, name in enumerate(["layer", "head", *METRIC_NAMES]):
        assert header.sectionSize(column) >= metrics.horizontalAdvance(name) + 8, name


def test_a_metric_that_rounds_to_zero_never_reads_minus_zero():
    from explorer.widgets.head_metrics_table import metric_text

    assert metric_text(-1e-7) == "0.0000" and metric_text(-0.25) == "-0.2500" and metric_text(0.0013) == "0.0013"


def test_the_heat_table_paints_the_minimum_in_a_colour_not_white():
    from explorer.widgets.model_view import metric_colour_map

    lowest = metric_colour_map().map([0.0], mode="byte")[0][:3]
    assert sum(int(c) for c in lowest) < 3 * 235  # visibly coloured on the white canvas


def test_the_metrics_table_never_makes_a_python_item(qtbot, monkeypatch):
    """The table's cells are set through indexes, never as QStandardItem wrappers: a wrapper alive
    when the model deletes its item can stand for a later object at that address (a window's widget
    came back from children() as a QStandardItem, in CI). Headers keep their tooltips and sorting
    still reads the exact numbers."""
    from PySide6.QtCore import Qt

    import explorer.widgets.head_metrics_table as table_module
    from explorer.widgets.head_metrics_table import SORT_ROLE, TOOLTIPS, HeadMetricsTable

    def no_items(*_a, **_k):
        raise AssertionError("a Python QStandardItem was made")

    monkeypatch.setattr(table_module, "QStandardItem", no_items, raising=False)
    table = HeadMetricsTable()
    qtbot.addWidget(table)
    values = np.array([[0.5, np.nan, 0.25]])
    table.set_metrics({"entropy": values, "self": -values})
    model = table.model
    assert model.headerData(2, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole) == TOOLTIPS["entropy"]
    assert [model.data(model.index(r, 2)) for r in range(3)] == ["0.5000", "—", "0.2500"]
    assert model.data(model.index(1, 2), SORT_ROLE) == float("inf")  # NaN sorts last
    table.sort_by("entropy", descending=False)
    assert table.shown_rows() == [(0, 2), (0, 0), (0, 1)]
