"""The atlas window: the table sorts, the map and the scatter follow the chosen columns, a head opens
its best text, two atlases compare as a difference; the worker computes off the GUI thread."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from explorer.panels.atlas_window import AtlasPanel, AtlasWindow, metric_of
from models.reads.atlas import COLUMNS, Atlas, write_atlas


def fake_atlas(seed: int, name: str = "fake") -> Atlas:
    rng = np.random.default_rng(seed)
    shape = (3, 4)
    cols = {"texts": np.full(shape, 5.0)} | {c: rng.random(shape) for c in COLUMNS[3:]}
    lines = rng.integers(1, 4, size=shape)
    return Atlas(name, 3, 4, 5, cols, best_line={"previous": lines, "entropy": lines},
                 best_value={"previous": cols["previous_mean"], "entropy": cols["entropy_mean"]},
                 best_text={1: "one", 2: "two", 3: "three"})  # fmt: skip


def test_table_map_scatter_and_choosing_a_head(qtbot):
    panel = AtlasPanel()
    qtbot.addWidget(panel)
    atlas = fake_atlas(0)
    panel.set_atlas(atlas)
    model = panel.table_model
    assert model.rowCount() == 12 and model.columnCount() == 1 + len(atlas.columns)
    assert model.data(model.index(5, 0)) == "L1 H1"
    column = 1 + model.names.index("previous_mean")
    model.sort(column, Qt.SortOrder.DescendingOrder)
    layer, head = model.heads[0]
    assert atlas.columns["previous_mean"][layer, head] == atlas.columns["previous_mean"].max()
    panel.colour_combo.setCurrentText("induction")
    np.testing.assert_array_equal(panel.map_image.image, atlas.columns["induction"])
    panel.x_combo.setCurrentText("entropy_mean")
    panel.y_combo.setCurrentText("previous_mean")
    x, y = panel.scatter.getData()
    np.testing.assert_array_equal(x, atlas.columns["entropy_mean"].ravel())
    np.testing.assert_array_equal(y, atlas.columns["previous_mean"].ravel())
    assert [t.text() for t in panel.labels.labels][:2] == ["L0 H0", "L0 H1"]
    panel.colour_combo.setCurrentText("previous_mean")
    with qtbot.waitSignal(panel.head_chosen) as got:
        panel.choose(2, 3)
    assert got.args == [2, 3, atlas.best_text[int(atlas.best_line["previous"][2, 3])]]
    assert metric_of("entropy_sd") == "entropy" and metric_of("induction") == "induction"


def test_compare_two_atlas_folders(qtbot, tmp_path):
    a, b = fake_atlas(0, "a"), fake_atlas(1, "b")
    write_atlas(a, tmp_path / "a")
    write_atlas(b, tmp_path / "b")
    panel = AtlasPanel()
    qtbot.addWidget(panel)
    assert not panel.compare_folder(tmp_path / "b") and "first" in panel.status.text()
    assert panel.open_folder(tmp_path / "a") and panel.compare_folder(tmp_path / "b")
    shown = panel.shown
    np.testing.assert_allclose(shown.columns["entropy_mean"], a.columns["entropy_mean"] - b.columns["entropy_mean"])
    panel.colour_combo.setCurrentText("entropy_mean")
    assert panel.colour_bar.levels()[0] < 0  # a difference is signed: a diverging map about 0
    assert not panel.open_folder(tmp_path) and panel.status.text().startswith("error:")


def test_worker_computes_a_corpus_atlas_off_the_gui_thread(qtbot, tmp_path):
    from models.pretrained import load_model

    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n\na dog ran in the park\nbirds sing\n")
    window = AtlasWindow(None, lambda: load_model("minilm", device="cpu"))
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.panel.worker.finished, timeout=600_000):
        window.panel.run(str(corpus))
    atlas = window.panel.atlas
    assert atlas.texts == 3 and atlas.manifest["corpus"]["path"] == str(corpus)
    assert window.panel.table_model.rowCount() == 72
    assert set(atlas.best_text.values()) <= {"the cat sat on the mat", "a dog ran in the park", "birds sing"}


def test_model_view_toggles_to_weighted_norms(qtbot):
    from explorer.panels.survey_panel import SurveyPanel
    from models.pretrained import load_model
    from models.reads.survey import head_metrics

    model = load_model("minilm", device="cpu")
    panel = SurveyPanel()
    qtbot.addWidget(panel)
    assert not panel.measure_combo.isEnabled()
    with qtbot.waitSignal(panel.survey_shown, timeout=300_000):
        panel.compute(model, "The cat sat on the mat.")
    assert panel.measure_combo.isEnabled() and "weighted" not in panel.survey.source
    with qtbot.waitSignal(panel.survey_shown, timeout=300_000):
        panel.measure_combo.setCurrentText("weighted norms")
    _, norms, _ = model.layer_weights("The cat sat on the mat.", weighted=True)
    shares = norms / norms.sum(-1, keepdims=True)
    np.testing.assert_allclose(panel.survey.weights, shares, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(panel.survey.metrics["entropy"], head_metrics(shares)["entropy"], atol=1e-9)
    assert "weighted norms" in panel.survey.source


def test_a_head_chosen_in_the_atlas_opens_its_best_text_in_the_stepper(make_window, settle, tmp_path):
    from explorer.state import Inputs

    window = make_window(Inputs(sentence="The cat sat on the mat.", model="minilm", layer=0))
    rng = np.random.default_rng(2)
    shape = (6, 12)
    atlas = Atlas("minilm", 6, 12, 3, {"texts": np.full(shape, 3.0)} | {c: rng.random(shape) for c in COLUMNS[3:]},
                  best_line={"previous": np.full(shape, 2)}, best_value={"previous": np.ones(shape)},
                  best_text={2: "A dog ran in the park."})  # fmt: skip
    write_atlas(atlas, tmp_path / "atlas")
    atlas_window = window.windows.open_atlas(folder=tmp_path / "atlas")
    panel = atlas_window.panel
    assert panel.atlas.layers == 6
    panel.colour_combo.setCurrentText("previous_mean")
    panel.choose(4, 7)
    assert window.state.inputs.sentence == "A dog ran in the park." and window.state.inputs.layer == 4
    assert window.state.head == 7
    settle(window, timeout=120_000)
    trace = window.state.display.trace
    assert trace.meta["layer"] == 4 and "dog" in trace.query_tokens
    atlas_window.close()


def test_a_session_remembers_the_atlas_corpus_and_its_checksum(make_window, settle, tmp_path):
    import hashlib

    from explorer.state import Inputs
    from models.files.session import load_session

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\na dog ran\n")
    sha = hashlib.sha256(corpus.read_bytes()).hexdigest()
    atlas = fake_atlas(3, "minilm")
    write_atlas(atlas, tmp_path / "atlas", corpus={"path": str(corpus), "sha256": sha, "bytes": 20})
    window = make_window(Inputs(sentence="a b c"))
    assert window.sessions.session().atlas is None  # no atlas open: nothing remembered
    window.windows.open_atlas(folder=tmp_path / "atlas")
    path = tmp_path / "s.zip"
    assert window.sessions.save_session(str(path))
    assert load_session(path).atlas == {"corpus": str(corpus), "sha256": sha}
    assert window.sessions.open_session(str(path))
    settle(window)
    assert "unchanged (sha256 matches)" in window.status_line.plain_text()
    corpus.write_text("something else\n")
    assert window.sessions.open_session(str(path))
    settle(window)
    assert "has changed since" in window.status_line.plain_text()


def test_the_empty_map_and_scatter_show_no_numbers_before_an_atlas(qtbot):
    """Issue 44 point 14, in a real window: File → Head atlas… before a run drew the map's and the
    scatter's axes −0.5 … 0.5, numbers of nothing (the Generate window had been mended, not this one)."""
    import pyqtgraph as pg
    from test_gui_pictures import drawn_specs

    panel = AtlasPanel()
    qtbot.addWidget(panel)
    panel.resize(800, 600)
    panel.show()
    qtbot.waitExposed(panel)

    def numbers() -> list[str]:
        axes = [item for plot in (panel.map_plot, panel.scatter_plot) for item in plot.scene().items()
                if isinstance(item, pg.AxisItem)]  # fmt: skip
        return [text for axis in axes if axis.isVisible() for _rect, _flags, text in drawn_specs(axis)]

    assert numbers() == []
    panel.set_atlas(fake_atlas(0))
    panel.views.setCurrentIndex(1)
    qtbot.wait(50)
    assert "L0" in numbers() or "0" in numbers()  # an atlas shown: its axes are numbered again
