"""Axes drawn alike share one drawing: the picture cache must never show another axis's labels."""

import numpy as np
from PySide6.QtGui import QImage

import explorer.widgets.token_axis as token_axis
from explorer.state import Inputs


def _pixels(widget) -> np.ndarray:
    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine()).copy()


def _redraw(window) -> np.ndarray:
    for plot in window.matrix_view.plots:
        for axis in (plot.left, plot.bottom):
            axis.picture = None
            axis.update()  # and its pixmap (the axes are cached in device pixels)
    return _pixels(window.matrix_view.canvas)


def test_shared_axis_pictures_draw_exactly_what_each_axis_would(make_window, settle, monkeypatch):
    window = make_window(Inputs(sentence="The cat sat on the mat.", heads=6, d_model=24))
    window.resize(1300, 850)
    settle(window)
    token_axis.clear_shared_pictures()
    shared = _redraw(window)
    bottoms = [plot.bottom for plot in window.matrix_view.plots]
    assert len({id(axis.picture) for axis in bottoms}) < len(bottoms)  # drawn once, replayed
    monkeypatch.setattr(token_axis, "SHARED_PICTURES", 0)  # each axis draws its own
    token_axis.clear_shared_pictures()
    np.testing.assert_array_equal(_redraw(window), shared)

    # Other labels (another sentence) never replay the old drawing.
    monkeypatch.setattr(token_axis, "SHARED_PICTURES", 64)
    window.state.update_inputs(sentence="A dog ran in the park.")
    settle(window)
    fresh = _redraw(window)
    monkeypatch.setattr(token_axis, "SHARED_PICTURES", 0)
    token_axis.clear_shared_pictures()
    np.testing.assert_array_equal(_redraw(window), fresh)
    assert not np.array_equal(fresh, shared)


def test_a_new_result_with_the_same_labels_copies_the_axes_rather_than_drawing_them(make_window, settle, monkeypatch):
    """The axes are kept as pixmaps: repainting the heatmaps for new numbers (same tokens) draws no label."""
    drawn = []
    paint = token_axis.TokenAxis.paint
    # Patched before the axes exist (PySide looks a Python override up once per object).
    monkeypatch.setattr(token_axis.TokenAxis, "paint", lambda self, *a: (drawn.append(self), paint(self, *a)))
    window = make_window(Inputs(sentence="The cat sat on the mat.", heads=4, d_model=16))
    settle(window)
    before = _pixels(window.matrix_view.canvas)
    assert drawn  # the axes were drawn once
    drawn.clear()
    window.state.update_inputs(seed=7)  # new weights, the same tokens
    settle(window)
    after = _pixels(window.matrix_view.canvas)
    assert not np.array_equal(before, after)  # the heatmaps were painted again
    assert drawn == []


def test_an_axis_drawn_again_when_its_title_or_labels_change(make_window, settle):
    """A cached axis is never stale: a new title or new labels are drawn."""
    window = make_window(Inputs(sentence="The cat sat on the mat.", heads=2, d_model=16))
    settle(window)
    axis = window.matrix_view.plots[0].bottom
    view = window.matrix_view.canvas
    first = _pixels(view)
    axis.set_title("a title no stage has")
    retitled = _pixels(view)
    assert not np.array_equal(first, retitled)
    axis.set_labels(tuple(f"other{i}" for i in range(len(axis.labels))))
    assert not np.array_equal(_pixels(view), retitled)


def test_a_new_result_sets_no_axis_title_again(make_window, settle, monkeypatch):
    """pyqtgraph lays an axis out and draws it again whenever its title is set, even to the same
    text: the focus panel's "weight a_ij" and the colour bar's title were set on every result."""
    import pyqtgraph as pg

    window = make_window(Inputs(sentence="The cat sat on the mat.", heads=4, d_model=16), stage="weights")
    settle(window)
    titled = []
    set_label = pg.AxisItem.setLabel
    monkeypatch.setattr(pg.AxisItem, "setLabel", lambda self, *a, **k: (titled.append(self), set_label(self, *a, **k)))
    window.state.update_inputs(seed=7)
    settle(window)
    window.jobs.wait_until_idle()
    assert window.focus_panel.chart.getAxis("left").labelText == "weight a_ij"
    assert titled == []


def test_labels_are_measured_once_for_all_axes_and_as_each_axis_would(qapp, monkeypatch):
    """A grid's axes share their tokens: shown_and_widths measures a label set once per font, and
    what it keeps is what a fresh measurement gives (another font: measured again)."""
    from PySide6.QtGui import QFont, QFontMetricsF

    measured = []
    real = QFontMetricsF.horizontalAdvance
    monkeypatch.setattr(QFontMetricsF, "horizontalAdvance",
                        lambda self, text: measured.append(text) or real(self, text))  # fmt: skip
    labels = ("The", "cat", "sat", " ", "\u4e2d")
    font = QFont()
    axes = [token_axis.TokenAxis("bottom") for _ in range(6)]
    for axis in axes:
        axis.set_labels(labels)
    assert len(measured) == len(labels)  # six axes, measured once
    shown, widths = token_axis.shown_and_widths(labels, font, QFontMetricsF(font))
    assert [real(QFontMetricsF(font), token_axis.shorten(s)) for s in shown] == widths
    big = QFont(font)
    big.setPixelSize(30)
    _, big_widths = token_axis.shown_and_widths(labels, big, QFontMetricsF(big))
    assert big_widths[0] > widths[0]
