"""The mask painter: clicks toggle, drags paint, the saved .npy is the mask, and the CLI agrees."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from explorer.widgets.mask_painter import MaskPainter
from main import main
from models.cli.export import load_matrix
from models.files.export import read_trace_files, write_array

TOKENS = ("the", "cat", "sat", "on", "the", "mat")
LEFT, NO = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton


@pytest.fixture(autouse=True)
def every_move_counts():
    """pyqtgraph drops moves closer together than its rate limit; a test sends them at once."""
    old = pg.getConfigOption("mouseRateLimit")
    pg.setConfigOption("mouseRateLimit", 0)
    yield
    pg.setConfigOption("mouseRateLimit", old)


def _painter(qtbot) -> MaskPainter:
    w = MaskPainter(load_array=lambda p: load_matrix(p, "mask"), save_array=write_array)
    qtbot.addWidget(w)
    w.resize(420, 420)
    w.set_tokens(TOKENS, TOKENS, pads=(2,))
    w.show()
    qtbot.waitExposed(w)
    QApplication.processEvents()
    return w


def _point(w: MaskPainter, row: int, col: int) -> QPointF:
    scene = w.grid.mapToScene(QPointF(col + 0.5, row + 0.5))
    return QPointF(w.view.mapFromScene(scene))


def _send(w, kind, point, button, buttons):
    vp = w.view.viewport()
    event = QMouseEvent(kind, point, vp.mapToGlobal(point), button, buttons, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(vp, event)


def _click(w, row, col):
    p = _point(w, row, col)
    _send(w, QEvent.Type.MouseButtonPress, p, LEFT, LEFT)
    _send(w, QEvent.Type.MouseButtonRelease, p, LEFT, NO)


def _drag(w, cells):
    points = [_point(w, r, c) for r, c in cells]
    _send(w, QEvent.Type.MouseButtonPress, points[0], LEFT, LEFT)
    for p in points[1:]:
        _send(w, QEvent.Type.MouseMove, p, NO, LEFT)
    _send(w, QEvent.Type.MouseButtonRelease, points[-1], LEFT, NO)


def test_a_click_toggles_one_cell_and_a_second_click_shows_it_again(qtbot):
    w = _painter(qtbot)
    seen = []
    w.mask_changed.connect(seen.append)
    _click(w, 1, 4)
    expected = np.zeros((6, 6), bool)
    expected[1, 4] = True
    np.testing.assert_array_equal(w.mask(), expected)
    np.testing.assert_array_equal(seen[-1], expected)
    _click(w, 1, 4)
    assert not w.mask().any()


def test_a_drag_paints_every_cell_it_crosses_with_the_first_cells_new_state(qtbot):
    w = _painter(qtbot)
    _drag(w, [(0, 0), (0, 3), (3, 3)])  # fast moves: the cells between are painted too
    expected = np.zeros((6, 6), bool)
    expected[0, 0:4] = True
    expected[0:4, 3] = True
    np.testing.assert_array_equal(w.mask(), expected)
    _drag(w, [(0, 1), (0, 2)])  # starting on a hidden cell erases
    expected[0, 1:3] = False
    np.testing.assert_array_equal(w.mask(), expected)


def test_starting_points_none_causal_padding(qtbot):
    w = _painter(qtbot)
    w.buttons["causal"].click()
    np.testing.assert_array_equal(w.mask(), np.triu(np.ones((6, 6), bool), 1))
    w.buttons["padding"].click()
    assert w.mask()[:, 2].all() and w.mask().sum() == 6
    w.buttons["none"].click()
    assert not w.mask().any()


def test_saved_npy_equals_the_mask_and_export_with_it_zeroes_exactly_those_weights(qtbot, tmp_path):
    w = _painter(qtbot)
    w.start_from("causal")
    _click(w, 4, 1)
    _click(w, 5, 5)
    path = tmp_path / "painted.npy"
    assert w.save_file(str(path))
    saved = np.load(path, allow_pickle=False)
    assert saved.dtype == bool
    np.testing.assert_array_equal(saved, w.mask())
    out = tmp_path / "export"
    argv = ["export", "--sentence", " ".join(TOKENS), "--mask", "custom", "--mask-file", str(path), "--out", str(out)]
    assert main(argv) == 0
    _, arrays = read_trace_files(out)
    weights = arrays["weights"]  # (h, 6, 6)
    assert (weights[:, saved] == 0).all()
    assert (weights[:, ~saved] > 0).all()


def test_opening_a_bad_file_says_why_and_keeps_the_mask(qtbot, tmp_path):
    w = _painter(qtbot)
    _click(w, 2, 2)
    before = w.mask()
    errors = []
    w.error.connect(errors.append)
    np.save(tmp_path / "f.npy", np.zeros((6, 6), np.float32))
    np.save(tmp_path / "s.npy", np.zeros((5, 6), bool))
    for name in ("f.npy", "s.npy", "absent.npy"):
        assert not w.open_file(str(tmp_path / name))
    assert "booleans" in errors[0] and "shape (5, 6)" in errors[1] and "not found" in errors[2]
    np.testing.assert_array_equal(w.mask(), before)
    good = np.eye(6, dtype=bool)
    np.save(tmp_path / "g.npy", good)
    assert w.open_file(str(tmp_path / "g.npy"))
    np.testing.assert_array_equal(w.mask(), good)
    w.grab().save(str(tmp_path / "painter.png"))
