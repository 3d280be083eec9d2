"""Issue 44, "what a newcomer trips over, round 4": the pictures (each test failed before its fix)."""

from __future__ import annotations

import re

import numpy as np
import pyqtgraph as pg


def axes_of(widget) -> list[pg.AxisItem]:
    """Every pyqtgraph axis (colour bars' included) in every scene under ``widget``."""
    scenes = {view.scene() for view in widget.findChildren(pg.GraphicsView)}
    if isinstance(widget, pg.GraphicsView):
        scenes.add(widget.scene())
    return [item for scene in scenes for item in scene.items() if isinstance(item, pg.AxisItem)]


def test_no_axis_reads_its_numbers_through_an_si_prefix(qtbot):
    """Item 7: the rollout's colour bars read 0–700 "(×0.001)" while the bars beside read 0–0.7."""
    from explorer.widgets.rollout_view import RolloutView

    view = RolloutView()
    qtbot.addWidget(view)
    view.resize(900, 600)
    rollout = np.tile(np.eye(4, dtype=np.float32) * 0.7, (2, 1, 1))
    view.set_rollout(rollout, ("a", "b", "c", "d"))
    view.show()
    qtbot.wait(50)
    axes = axes_of(view)
    assert len(axes) >= 6  # the three plots' and the two colour bars'
    assert all(not axis.autoSIPrefix and axis.autoSIPrefixScale == 1.0 for axis in axes)
    assert all("x0.001" not in axis.labelString() for axis in axes)


TOKENS = ("<s>", "</s>", "<b>", "&amp;")  # tokens a rich-text label would read as tags or an entity
AS_MARKUP = ("<s>", "</s>")  # the app writes neither itself: in a rich text's source, a token read as a tag


def drawn_specs(axis: pg.AxisItem) -> list:
    """(rectangle, flags, text) of each tick text ``axis`` draws now (pyqtgraph's own draw specs: those
    it drops left out)."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return list(specs[2]) if specs else []


def drawn_ticks(axis: pg.AxisItem) -> list[str]:
    return [text for _rect, _flags, text in drawn_specs(axis)]


def rendered(text: str, rich: bool) -> str:
    from PySide6.QtGui import QTextDocument

    if not rich:
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def shown_texts(widget) -> list[tuple[str, str, bool]]:
    """(where, source, rich) of every text shown under ``widget``: labels, lists, tables, combo boxes,
    plot titles, axis titles and ticks."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QComboBox, QLabel, QListWidget, QTableWidget

    out = []
    for label in widget.findChildren(QLabel):
        fmt = label.textFormat()
        rich = fmt == Qt.TextFormat.RichText or (fmt == Qt.TextFormat.AutoText and Qt.mightBeRichText(label.text()))
        out.append((f"QLabel {label.objectName()}", label.text(), rich))
    for lst in widget.findChildren(QListWidget):
        out += [("list", lst.item(i).text(), False) for i in range(lst.count())]
    for table in widget.findChildren(QTableWidget):
        out += [("table", table.item(r, c).text(), False) for r in range(table.rowCount())
                for c in range(table.columnCount()) if table.item(r, c) is not None]  # fmt: skip
    for box in widget.findChildren(QComboBox):
        out += [("combo", box.itemText(i), False) for i in range(box.count())]
    scenes = {view.scene() for view in widget.findChildren(pg.GraphicsView)}
    for scene in scenes:
        for item in scene.items():
            if isinstance(item, pg.LabelItem):  # plot titles: pyqtgraph lays them out as HTML
                out.append(("title", item.text, True))
            if isinstance(item, pg.AxisItem):
                out.append(("axis title", item.labelString() if item.labelText else "", True))
                out += [("tick", text, False) for text in drawn_ticks(item)]
            if isinstance(item, pg.TextItem):
                out.append(("text item", item.toPlainText(), False))
    return out


def assert_tokens_shown(widget, what: str, tokens: tuple[str, ...] = TOKENS) -> None:
    texts = shown_texts(widget)
    for where, source, rich in texts:
        if rich:
            assert not any(t in source for t in AS_MARKUP), f"{what}: {where} reads a token as markup: {source!r}"
            bare = re.search(r"&(?!amp;)", rendered(source, rich))  # the token &amp; read as an entity: "&"
            assert not bare, f"{what}: {where} reads &amp; as an entity: {source!r}"
    shown = "\n".join(rendered(source, rich) for _where, source, rich in texts)
    missing = [t for t in tokens if t not in shown]
    assert not missing, f"{what} never shows {missing} as itself"


def test_tokens_that_look_like_html_are_themselves_in_every_view(qtbot, make_window, settle, tmp_path):
    """Item 2: the Why panel's title read ``'' = 0.0059`` struck through for key ``<s>``. A run whose
    tokens are ``<s>``, ``</s>``, ``<b>``, ``&amp;``: every text of the main window (axes, focus,
    inspector, status), the Why panel and the compare window shows them as themselves."""
    from explorer.state import Inputs

    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))
    window = make_window(Inputs(embeddings_file=str(path), labels=TOKENS, heads=2, d_model=8, mask="causal"),
                         stage="scaled")  # fmt: skip
    window.resize(1600, 1000)
    settle(window)
    window.state.set_query(3)
    window.select_cell(0, 3, 0)
    qtbot.waitUntil(lambda: window.inspector.inspector.derivation is not None, timeout=15_000)
    dock = window.why.open()
    dock.panel.show_cell(window.state.display, window.state.stepper.stage, 0, 3, 0, None)
    qtbot.waitUntil(lambda: dock.panel.result is not None, timeout=15_000)
    qtbot.wait(50)
    assert "'<s>'" in dock.panel.title.text()
    assert_tokens_shown(dock.panel, "the Why panel", ("<s>", "&amp;"))  # its query and key
    assert_tokens_shown(window, "the main window")
    compare = window.compare
    compare.pin()
    qtbot.waitUntil(lambda: compare.comparison is not None, timeout=15_000)
    assert_tokens_shown(compare.view, "the compare window")


def test_the_whole_model_views_show_such_tokens_as_themselves(qtbot):
    """Item 2, the rollout and the model's per-layer views: titles, ticks and the token box."""
    from explorer.widgets.rollout_view import RolloutView

    view = RolloutView()
    qtbot.addWidget(view)
    view.resize(1000, 700)
    view.set_rollout(np.tile(np.eye(4, dtype=np.float32), (2, 1, 1)), TOKENS)
    view.show()
    qtbot.wait(50)
    assert_tokens_shown(view, "the rollout")


def _why_result(n: int) -> dict:
    """A Why answer with MiniLM's sources: ``n`` of them on each side, the table's terms varied."""
    names = ["embed", "pos", "embed norm bias"] + [f"L{l} H{h}" for l in range(2) for h in range(12)]  # noqa: E741
    names += ["L0 attn bias", "L0 mlp", "L0 norm bias", "L1 attn bias", "L1 mlp", "L1 norm bias", "bias"]
    names = names[:n]
    table = np.random.default_rng(1).standard_normal((n, n)) * np.logspace(-3, 0, n)
    return {"table": table.tolist(), "query_sources": names, "key_sources": names, "stage": "scaled", "head": 0,
            "row": 37, "col": 0, "layer": 2, "query_token": ".", "key_token": "[CLS]", "score": float(table.sum()),
            "relative_error": 0.0}  # fmt: skip


def test_every_key_column_of_the_why_table_has_its_name_and_total_apart(qtbot):
    """Item 3: MiniLM's 14 key columns had 13 names (the folded "21 others" none) and 13 totals (the
    first column's missing), the totals overprinting ("+0.081+0.0054+0.055")."""
    from PySide6.QtGui import QFontMetricsF

    from explorer.panels.why_panel import WhyPanel

    panel = WhyPanel()
    qtbot.addWidget(panel)
    panel.resize(860, 800)  # the dock's width when the Why view is shown
    panel.show()
    panel.show_result(_why_result(34))
    qtbot.wait(100)
    columns = len(panel.cols)
    assert columns == 14 and panel.cols[-1] == "21 others"
    for side in ("bottom", "top"):
        axis = panel.plot.getAxis(side)
        specs = drawn_specs(axis)
        assert len(specs) == columns, f"{side}: {len(specs)} labels for {columns} columns"
        metrics = QFontMetricsF(axis.style["tickFont"])
        spans = {}  # line -> the x extents of the labels drawn on it
        for rect, _flags, text in specs:
            line = len(text) - len(text.strip("\n"))
            half = metrics.horizontalAdvance(text.strip("\n")) / 2
            spans.setdefault(line, []).append((rect.center().x() - half, rect.center().x() + half))
        for line, extents in spans.items():
            extents.sort()
            assert all(a[1] < b[0] for a, b in zip(extents, extents[1:])), f"{side} line {line} overprints"


def test_numbers_in_cells_are_three_digits_or_none(qtbot, make_window, settle):
    """Item 6: as the window narrowed, the cells' numbers fell to one significant digit ("0.1 0.2 0.7",
    "3" for 3.141, "−2") or a 7 px font (digits ~5 px high); docs/window.md promises 3 digits."""
    from explorer.state import Inputs
    from explorer.widgets.cell_numbers import CellNumbers, cell_text

    one_digit = np.array([[3.141, -2.345, 0.7123]])
    widths = {d: max(len(cell_text(v, d)) for v in one_digit.ravel()) for d in (1, 3)}
    assert widths[1] < widths[3]
    # Cells wide enough for "−2" in a 12 px font and too narrow for "−2.35": nothing, not "−2".
    sizes, _texts = CellNumbers.fitted_sizes([(0, 1, 0, 3, one_digit, 26.0, 20.0)])
    assert not any(any(row) for row in sizes)
    window = make_window(Inputs(sentence="The cat sat on the mat.", heads=2, d_model=16,
                                mask="causal"), stage="scaled")  # fmt: skip
    view = window.matrix_view
    values = [window.state.display.trace["scaled"].head(h) for h in range(2)]
    written = 0
    for width in (700, 900, 1100, 1300, 1500, 1700):
        window.resize(width, 1000)
        settle(window)
        view.flush()
        view.numbers.update()
        for plot, head_values in zip(view.plots, values):
            item = view.numbers.item_for(plot)
            for (row, col), text in item.texts().items():
                assert text == cell_text(float(head_values[row, col]), 3), (width, row, col, text)
                written += 1
            assert not item.cells or item.font.pixelSize() >= 10, (width, item.font.pixelSize())
    assert written  # the widest windows write them


def test_the_cross_row_of_the_whole_model_window_has_no_rollout(qtbot, make_window, tmp_path):
    """Item 8: a BART whose source and target have one length showed "R after layer 2" for its cross
    block, columns labelled with the target's tokens."""
    import sys
    from pathlib import Path

    import pytest

    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from encdec_refs import TARGET, build

    from explorer.state import Inputs

    folder = tmp_path / "tiny-bart"
    folder.mkdir()
    build(folder, "bart")
    window = make_window(Inputs(sentence=TARGET, cross_sentence=TARGET, model=str(folder)), persist=False)
    survey = window.windows.open_survey(model=True)
    qtbot.addWidget(survey)
    qtbot.waitUntil(lambda: all(p.survey is not None for p in survey.panels.values()), timeout=60_000)
    cross = survey.panels["cross"]
    assert cross.survey.weights.shape[-1] == cross.survey.weights.shape[-2]  # one length: square
    assert cross.survey.rollout is None and cross.rollout_view.rollout is None
    assert "cross-attention" in cross.rollout_view.message.text()
    assert not cross.rollout_view.controls.isVisibleTo(cross.rollout_view)  # no slider for no rollout
    assert survey.panels["encoder"].rollout_view.rollout is not None
    survey.close()


def _inside_viewport(window, widget) -> bool:
    area = window.inspector_scroll
    top_left = widget.mapTo(area.viewport(), widget.rect().topLeft())
    return widget.isVisible() and 0 <= top_left.y() and top_left.y() + widget.height() <= area.viewport().height()


def test_the_inspector_screenshot_shows_the_whole_derivation(qtbot, make_window, settle):
    """Item 4: ``--view inspector`` on MiniLM's weights cut the derivation, its value line included, at
    1400 × 1400 (the cap): the bar chart took ~450 px."""
    from explorer.files.view_shots import open_view
    from explorer.state import Inputs

    window = make_window(Inputs(model="minilm", sentence="The animal didn't cross the street because it was too "
                                "tired."), stage="weights")  # fmt: skip
    window.resize(1400, 900)  # a screenshot's window (explorer.app)
    settle(window)
    shot = open_view(window, "inspector", (0, 14, 0), None)
    qtbot.waitUntil(lambda: window.inspector.inspector.derivation is not None, timeout=15_000)
    qtbot.waitUntil(lambda: shot.ready() and window.is_settled(), timeout=15_000)  # as explorer.app polls
    qtbot.wait(50)
    inspector = window.inspector.inspector
    assert inspector.plot.height() <= 260
    for widget in (inspector.title, inspector.plot, inspector.terms, inspector.value, window.inspector.indices):
        assert _inside_viewport(window, widget), widget.objectName() or widget.text()[:40]
    assert window.height() <= 1400 and window.inspector_scroll.verticalScrollBar().maximum() == 0


def test_the_atlas_scatter_labels_stand_apart_inside_the_plot(qtbot):
    """Item 13: "L1 H1", "L1 H3" and "L1 H0" were one blob, "L0 H1" was cut at the plot's edge. Points
    crowded in one corner and one far out: no two shown labels touch, each lies inside the plot, the
    point far from the others is labelled, and a zoom places them again."""
    from explorer.panels.atlas_window import AtlasPanel
    from models.reads.atlas import COLUMNS, Atlas

    shape = (4, 4)
    rng = np.random.default_rng(0)
    cols = {"texts": np.full(shape, 5.0)} | {c: rng.random(shape) for c in COLUMNS[3:]}
    cols["entropy_mean"] = 1.0 + rng.random(shape) * 0.01  # 15 points within 1 % of the x range...
    cols["previous_mean"] = 0.5 + rng.random(shape) * 0.01
    cols["entropy_mean"][0, 1], cols["previous_mean"][0, 1] = 3.0, 0.9  # ...and L0 H1 at the far corner
    atlas = Atlas("crowded", 4, 4, 5, cols, best_line={}, best_value={}, best_text={})
    panel = AtlasPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    panel.set_atlas(atlas)
    panel.views.setCurrentIndex(1)
    panel.x_combo.setCurrentText("entropy_mean")
    panel.y_combo.setCurrentText("previous_mean")
    qtbot.wait(100)

    def check():
        labels = panel.labels
        room = labels.box.sceneBoundingRect()
        shown = labels.shown()
        rects = [labels.scene_rect(label) for label in shown]
        assert 2 <= len(shown) < 16  # the crowd is thinned, not all hidden
        assert all(room.contains(r) for r in rects)
        assert not any(a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1:])
        return {label.text() for label in shown}

    assert "L0 H1" in check()
    panel.scatter_plot.getPlotItem().getViewBox().setRange(xRange=(0.999, 1.011), yRange=(0.499, 0.511), padding=0)
    qtbot.wait(50)
    check()


def test_the_generate_step_line_draws_a_space_token(qtbot):
    """Item 14: the Generate window's step line read ``generated token 3 ' '`` (Python's repr) where
    every other view draws a space token as ``␣``; before a run its empty plots read −0.5 … 0.5."""
    from explorer.panels.generate_panel import GeneratePanel
    from models.pretrained import load_model

    panel = GeneratePanel(lambda name: load_model(name, device="cpu"), "induction")
    qtbot.addWidget(panel)
    panel.resize(1400, 900)
    panel.prompt_edit.setText("the cat sat on the mat. the cat")
    panel.new_tokens.setValue(4)
    panel.show()
    qtbot.wait(50)
    assert not any(drawn_ticks(axis) for axis in axes_of(panel))  # before a run: −0.5 … 0.5 of nothing
    panel.generate(now=True)
    assert panel.view is not None, panel.status.text()
    assert panel.wait_until_shown()
    assert sum(bool(drawn_ticks(axis)) for axis in axes_of(panel)) >= 6  # then every plot's numbers
    tokens = panel.view.tokens
    steps = [s for s in range(panel.view.steps) if tokens[panel.view.position(s)] == " "]
    assert steps  # the prompt's last token or a generated one is a space
    panel.slider.setValue(steps[0])
    qtbot.waitUntil(lambda: "'␣'" in panel.step_label.text(), timeout=10_000)
    assert "' '" not in panel.step_label.text()
    panel.worker.stop()
    panel.jobs.shutdown()


def test_the_colours_box_and_bar_say_the_scale_painted(qtbot, make_window, settle):
    """Item 14: the Colours box said "auto: 0 to 1" while the bar ran 0–0.15 (Weighted norms), and on
    Scores (disabled) too; the linear colour bars had no title."""
    from explorer.state import Inputs

    window = make_window(Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8, mask="causal"),
                         stage="weighted_norms")  # fmt: skip
    view = window.matrix_view
    box, bar = view.colour_combo, view.colour_bar
    assert bar.levels()[1] < 1.0 and box.currentText() == "auto: 0 to largest" and box.isEnabled()
    for stage, text, enabled in (("scores", "± largest", False), ("weights", "auto: 0 to 1", True)):
        window.state.set_stage(stage)
        settle(window)
        view.flush()
        assert (box.currentText(), box.isEnabled()) == (text, enabled), stage
        assert bar.getAxis("right").labelText, f"{stage}: an untitled colour bar"


def test_a_colour_bar_label_made_longer_stays_along_its_bar(qtbot):
    """Item 14: the Generate window's bar read "weight ÷ each head's large": the label, set longer after
    a shorter one, kept the shorter one's place (pyqtgraph centres it only on a resize) and ran past
    the bar's end."""
    from explorer.widgets.scale_bar import fit_label, scale_bar

    canvas = pg.GraphicsLayoutWidget()
    qtbot.addWidget(canvas)
    canvas.resize(500, 260)
    plot = canvas.addPlot()
    bar = scale_bar(plot, "")
    canvas.show()
    qtbot.wait(50)
    fit_label(bar, "÷ max")
    qtbot.wait(50)
    chosen = fit_label(bar, "weight ÷ each head's largest", "÷ max")
    qtbot.wait(50)
    axis = bar.axis
    span, text = axis.sceneBoundingRect(), axis.label.sceneBoundingRect()
    assert chosen == "weight ÷ each head's largest"
    assert span.top() - 1 <= text.top() and text.bottom() <= span.bottom() + 1, (span, text)


def test_the_rollout_colour_bar_labels_fit_short_bars(qtbot):
    """Item 9 (in part): in the encoder-decoder window's short rows the rollout's bar read "share (0 to
    the row's lar": each bar's label is the longest of its forms that fits along it."""
    from PySide6.QtGui import QFontMetrics

    from explorer.widgets.rollout_view import RolloutView

    view = RolloutView()
    qtbot.addWidget(view)
    view.resize(700, 330)
    view.set_rollout(np.tile(np.eye(8, dtype=np.float32), (2, 1, 1)), tuple("abcdefgh"))
    view.show()
    qtbot.wait(100)
    for bar in (view.map_bar, view.rows_bar):
        axis = bar.axis
        if axis.labelText and axis.label.isVisible():
            width = QFontMetrics(axis.label.font()).horizontalAdvance(axis.labelText)
            assert width <= bar.geometry().height(), (axis.labelText, width, bar.geometry().height())
            span, text = axis.sceneBoundingRect(), axis.label.sceneBoundingRect()
            assert span.top() - 1 <= text.top() and text.bottom() <= span.bottom() + 1, axis.labelText
