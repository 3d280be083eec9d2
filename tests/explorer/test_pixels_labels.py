"""Every label readable: all token labels when they fit (upright below the matrix if need be), else
evenly spaced with their position; axis titles; right-to-left pieces in logical order; no two
labels overlap."""

import numpy as np
from pixels import grab, overlapping

from explorer.state import Inputs
from explorer.widgets.labels import LRM, display_label

README = "The animal didn't cross the street because it was too tired."


def _labels(axis):
    return axis.drawn_labels()


def test_all_fourteen_tokens_of_the_readme_example_are_labelled(make_window):
    window = make_window(Inputs(sentence=README, heads=2, d_model=16, mask="causal"), stage="weights")
    view = window.matrix_view
    view.flush()
    n = len(window.state.display.trace.key_tokens)
    assert n == 14
    for plot in view.plots:
        drawn = _labels(plot.bottom)
        assert [text for _, text in drawn] == list(window.state.display.trace.key_tokens)
        assert not overlapping([rect for rect, _ in drawn])
    left = _labels(view.plots[0].left)
    assert len(left) == n and not overlapping([rect for rect, _ in left])
    assert view.plots[0].left.labelText == "query i" and view.plots[0].bottom.labelText == "key j"


def test_thinned_labels_carry_their_position_and_never_overlap(make_window):
    words = ["the", "cat", "sat"] * 334  # 1002 tokens, the same few words again and again
    window = make_window(Inputs(sentence=" ".join(words), heads=1, d_model=8), stage="weights")
    view = window.matrix_view
    view.flush()
    for axis in (view.plots[0].left, view.plots[0].bottom):
        drawn = _labels(axis)
        assert 5 <= len(drawn) < 1002
        positions = [int(text.split(" ")[0]) for _, text in drawn]
        steps = {b - a for a, b in zip(positions, positions[1:])}
        assert len(steps) == 1  # evenly spaced
        for (_, text), i in zip(drawn, positions):
            assert text == f"{i} {words[i]}"
        assert not overlapping([rect for rect, _ in drawn])


def test_cross_attention_axes_say_which_sentence(make_window):
    window = make_window(Inputs(sentence="The cat sat.", cross_enabled=True, cross_sentence="Die Katze.", heads=1,
                                d_model=8), stage="weights")  # fmt: skip
    window.matrix_view.flush()
    plot = window.matrix_view.plots[0]
    assert plot.left.labelText == "query i (2nd sentence)" and plot.bottom.labelText == "key j (1st sentence)"


def test_right_to_left_word_pieces_keep_their_logical_order(qapp):
    shown = display_label("##ل")
    assert shown.startswith(LRM) and shown.endswith("##ل")  # drawn left to right: "##" first
    assert display_label("the") == "the" and display_label("##ing") == "##ing"


class _NoGlyph:
    """A font that covers nothing beyond ASCII."""

    def supportsCharacter(self, cp):  # noqa: N802 - Qt's name
        return cp < 128


def test_code_points_wherever_a_token_is_drawn(qtbot, monkeypatch):
    import explorer.widgets.labels as labels
    from explorer.widgets.pad_picker import PadPicker
    from explorer.widgets.query_focus import contributions_html

    monkeypatch.setattr(labels, "raw_font", lambda _description: _NoGlyph())
    monkeypatch.setattr(labels, "installed_font_covers", lambda cp: cp < 128)
    picker = PadPicker()
    qtbot.addWidget(picker)
    picker.set_tokens(("a", "\u6211"), ())
    assert picker.item(1).text() == "1:U+6211"  # the pad picker
    html = contributions_html(("a", "\u6211"), np.array([0.2, 0.8], np.float32), np.zeros(2, np.float32))
    assert "U+6211" in html and "\u6211" not in html  # the focus list


def test_the_sentence_box_names_the_characters_no_font_draws(qtbot, monkeypatch):
    """A text box cannot write its own characters as code points (it would change the text): a
    line under it names the ones no installed font draws, which the box shows as boxes."""
    import explorer.widgets.labels as labels
    from explorer.state import ExplorerState
    from explorer.widgets.sentence_panel import SentencePanel

    monkeypatch.setattr(labels, "raw_font", lambda _description: _NoGlyph())
    monkeypatch.setattr(labels, "installed_font_covers", lambda cp: cp < 0x2E80)  # no CJK font
    panel = SentencePanel(ExplorerState(), [])
    qtbot.addWidget(panel)
    panel.sentence_edit.setText("caf\u00e9 \u6211\u4eec \u6211")
    assert panel.unseen_label.isVisibleTo(panel)
    assert "U+6211 U+4EEC" in panel.unseen_label.text() and "U+00E9" not in panel.unseen_label.text()
    panel.sentence_edit.setText("plain text")
    assert not panel.unseen_label.isVisibleTo(panel)


def test_a_long_largest_change_label_never_widens_the_window(make_window, settle):
    """The largest-Δ line's text asked for its whole width: the heatmaps' column then could not be
    narrower than 2,000 px, and the focus panel was pushed out of a 1,400 px window."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QApplication

    window = make_window(Inputs(sentence=README, heads=2, d_model=16, mask="causal"), stage="weights")
    window.resize(1400, 900)
    settle(window)
    width, least = window.width(), window.matrix_view.minimumSizeHint().width()
    window.experiment.largest.setText("largest Δ: head 1 · <b>" + "extraordinarily" * 12 + "</b> × <b>x</b> = +0.5")
    window.matrix_view.flush()
    QApplication.processEvents()
    assert window.matrix_view.minimumSizeHint().width() == least
    right = window.focus_panel.mapTo(window, QPoint(window.focus_panel.width(), 0)).x()
    assert window.width() == width and right <= window.width() and window.minimumSizeHint().width() <= 1400


def test_the_inspectors_bar_labels_never_overlap(qtbot, make_window):
    window = make_window(Inputs(sentence=README, heads=2, d_model=16, mask="causal"), stage="weights")
    window.select_cell(1, 9, 1)  # a weight: 14 bars, one per key
    window.matrix_view.flush()
    assert window.jobs.wait_until_idle()  # the derivation comes from the read thread
    from explorer.widgets.cell_inspector import CellInspector

    axis = window.inspector.findChild(CellInspector).bar_axis
    qtbot.waitUntil(lambda: axis.isVisible() and axis.size().width() > 50)
    drawn = axis.drawn_labels()
    assert len(drawn) >= 5 and not overlapping([rect for rect, _ in drawn])


def test_row_labels_come_back_when_a_grid_goes_from_two_columns_to_one(qtbot, make_window, settle):
    """Head 1's row labels were hidden in a two-column grid (its neighbour has them) and stayed 0 px
    wide when a taller window (a clicked cell's derivation) stacked the heads in one column."""
    window = make_window(Inputs(sentence=README, heads=2, d_model=16, mask="causal"), stage="scores")
    window.show()
    view = window.matrix_view
    for size, columns in (((1400, 600), 2), ((1400, 1100), 1), ((1800, 700), 2), ((1400, 1100), 1)):
        window.resize(*size)
        qtbot.waitUntil(lambda c=columns: view.grid.key == (2, c), timeout=5_000)
        settle(window)
        view.flush()
        for i, plot in enumerate(view.plots):
            assert plot.left.isVisible() == (i % columns == 0)
            if plot.left.isVisible():
                assert plot.left.width() == plot.left.label_room() > 40  # room for "because" and "query i"


def test_the_compare_windows_runs_label_all_fourteen_keys_and_name_their_axes(qtbot, make_window, settle):
    """The pinned and current plots showed every second key ("0 The", "2 didn", …) beside a
    difference plot that showed all 14: 14.6 px per cell was taken for too little room, against a
    fixed 15 px pitch, when an upright label needs the font's line height (~14 px). The compare
    plots had no axis titles either."""
    from PySide6.QtWidgets import QApplication

    window = make_window(Inputs(sentence=README, heads=2, d_model=16, mask="causal"), stage="weights")
    assert window.compare.pin()
    window.state.update_inputs(temperature=0.5)
    settle(window)
    view = window.compare.view
    view.resize(1100, 460)  # the compare window's own size (explorer.actions.compare_actions)
    qtbot.waitUntil(lambda: view.plots[2].bottom.size().width() > 100)
    assert window.jobs.wait_until_idle()  # the comparison at the device pixels of the laid-out view
    QApplication.processEvents()
    tokens = list(window.state.display.trace.key_tokens)
    for plot in view.plots:  # pinned, current, current − pinned
        drawn = plot.bottom.drawn_labels()
        assert [text for _, text in drawn] == tokens
        assert not overlapping([rect for rect, _ in drawn])
        rows = plot.left.drawn_labels()
        assert len(rows) == len(tokens) and not overlapping([rect for rect, _ in rows])
        assert plot.left.labelText == "query i" and plot.bottom.labelText == "key j"


def test_the_first_and_last_upright_labels_are_whole_beside_a_neighbouring_matrix(make_window, settle):
    """Upright labels at the edge of a matrix in a grid (3 px of overhang beside its neighbour) were
    drawn at their tick and half cut off (the first, "0 w0", showed as "0 w("): they move in instead."""
    window = make_window(Inputs(sentence=" ".join(f"w{i}" for i in range(300)), heads=8, d_model=64),
                         stage="weights")  # fmt: skip
    window.resize(1400, 900)
    settle(window)
    view = window.matrix_view
    view.flush()
    axis = view.plots[0].bottom
    drawn = _labels(axis)
    assert drawn[0][1] == "0 w0" and len(drawn) >= 4
    clip = axis.boundingRect()  # what the axis draws inside (pyqtgraph clips its text to it)
    for rect, _ in drawn:
        assert clip.left() <= rect.left() and rect.right() <= clip.right()
    # As pixels: the first label's ink fills both halves of its line (its glyphs' tops and bottoms).
    canvas = view.canvas
    image = canvas.grab().toImage()
    ratio = image.devicePixelRatio()
    rect = axis.mapRectToScene(drawn[0][0])
    top_left = canvas.mapFromScene(rect.topLeft())
    x0, y0 = int(top_left.x() * ratio), int(top_left.y() * ratio)
    w, h = int(rect.width() * ratio), int(rect.height() * ratio)
    pixels = grab(canvas)[y0 : y0 + h, x0 : x0 + w]
    ink = pixels.sum(axis=2) < 3 * 120
    left, right = ink[:, : w // 2].sum(), ink[:, w // 2 :].sum()
    assert left > 0.4 * right


def test_upright_labels_keep_their_room_while_they_are_drawn(make_window, settle):
    """pyqtgraph sized a bottom axis to one line of text as it drew new labels, though they stand
    upright: the first axis drawn with new tokens (the others replay its picture) shrank to ~11 px
    while painting and took its room back, which asked for the whole grid to be laid out again
    after every paint of new tokens. Painting new upright labels now asks for no layout."""
    from PySide6.QtCore import QEvent, QObject

    class Requests(QObject):
        after_paint = False
        count = 0

        def eventFilter(self, _obj, event):  # noqa: N802 - Qt API
            if self.after_paint and event.type() == QEvent.Type.LayoutRequest:
                self.count += 1
            return False

    long_words = "Extraordinary misunderstandings accumulate whenever overconfident administrators"
    window = make_window(Inputs(sentence=long_words, heads=4, d_model=16), stage="weights")
    window.resize(1400, 900)
    settle(window)
    view = window.matrix_view
    requests = Requests()
    view.canvas.ci.installEventFilter(requests)
    view.painted.connect(lambda _generation: setattr(requests, "after_paint", True))
    window.state.update_inputs(sentence="Unbelievably photosynthesising chrysanthemums notwithstanding")
    settle(window)
    assert requests.after_paint and all(plot.bottom.height() > 40 for plot in view.plots)  # upright labels
    assert requests.count == 0
