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
