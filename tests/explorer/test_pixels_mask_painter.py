"""The mask painter draws its grid: visible cells light, hidden ones in the masked grey of every
heatmap, thin borders between cells, and cells never far from square. It opened as a white area
with labels only (visible cells were painted white on white), so nothing said there were cells."""

from __future__ import annotations

import numpy as np
from pixels import cell_centre, device_rect, grab, near
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QApplication

from explorer.widgets.colormaps import CELL_BORDER_RGB, MASKED_RGB, mask_cell_colours
from explorer.widgets.mask_painter import MaskPainter

WHITE = (255, 255, 255)
TOKENS = ("the", "cat", "sat", "on", "the", "mat")


def _shown_painter(qtbot, width: int, height: int) -> MaskPainter:
    painter = MaskPainter()
    qtbot.addWidget(painter)
    painter.resize(width, height)  # the window's dock: 1,400 px wide for 6 tokens
    painter.set_tokens(TOKENS, TOKENS)
    painter.start_from("causal")
    painter.show()
    qtbot.waitExposed(painter)
    QApplication.processEvents()
    return painter


def test_hidden_cells_are_dark_visible_ones_light_with_borders_between(qtbot):
    painter = _shown_painter(qtbot, 1400, 300)
    mask = painter.mask()
    mask[0, 0] = True  # one more hidden cell below the diagonal's side, for good measure
    painter.set_mask(mask)
    QApplication.processEvents()
    pixels = grab(painter.view)
    box = painter.plot.getViewBox()
    shown, hidden = mask_cell_colours()
    assert hidden == MASKED_RGB and sum(shown) > 3 * 220 and sum(hidden) < 3 * 130  # light against dark
    x, y = cell_centre(painter.view, box, 5, 0)  # a visible cell: light, but not the background's white
    assert not near(pixels[y, x], WHITE, 20), pixels[y, x]
    for row in range(6):
        for col in range(6):
            x, y = cell_centre(painter.view, box, row, col)
            want = hidden if mask[row, col] else shown
            assert near(pixels[y, x], want), (row, col, pixels[y, x], want)
    # A border between two visible cells (row 5, cols 0 and 1): a line darker than the cells.
    x0, y0, x1, y1 = device_rect(painter.view, box, QRectF(1, 5, 0, 1))
    column = pixels[(y0 + y1) // 2, x0 - 1 : x0 + 2]
    assert any(near(p, CELL_BORDER_RGB, 30) for p in column), column


def test_cells_stay_near_square_in_a_wide_dock(qtbot):
    for width, height in ((1400, 300), (300, 900)):
        painter = _shown_painter(qtbot, width, height)
        x0, y0, x1, y1 = device_rect(painter.view, painter.plot.getViewBox(), QRectF(0, 0, 1, 1))
        cell_w, cell_h = x1 - x0, y1 - y0
        assert cell_w > 10 and cell_h > 10
        assert max(cell_w / cell_h, cell_h / cell_w) <= 2.05, (width, height, cell_w, cell_h)
        labels = painter.bottom.drawn_labels()
        assert [text for _, text in labels] == list(TOKENS)  # every key still labelled under its cell
        first = painter.view.mapFromScene(painter.bottom.mapToScene(labels[0][0].center()))
        assert np.isclose(first.x(), (x0 + x1) / 2 / painter.view.devicePixelRatioF(), atol=3)


def test_the_key_axis_and_its_title_span_the_grid_not_the_wide_dock(qtbot):
    """In a wide dock the grid keeps to the left: its key axis line and "key j" ran on across the dock
    (the title centred 500 px right of the grid). The plot now keeps to its grid's width."""
    painter = _shown_painter(qtbot, 1400, 300)
    qtbot.wait(100)  # the plot narrowed to its grid, then laid out again
    view, box = painter.view, painter.plot.getViewBox()
    ratio = view.devicePixelRatioF()
    x0, _, x1, _ = device_rect(view, box, QRectF(0, 0, len(TOKENS), 1))  # the whole grid's columns
    assert view.width() < 700  # not the dock's 1,400 px
    axis_end = view.mapFromScene(box.sceneBoundingRect().topRight()).x()
    assert abs(axis_end - x1 / ratio) <= 3  # the axis line stops where the grid stops
    title = painter.bottom.label
    centre = view.mapFromScene(title.mapToScene(title.boundingRect().center())).x()
    assert x0 / ratio < centre < x1 / ratio
    x0c, y0c, x1c, y1c = device_rect(view, box, QRectF(0, 0, 1, 1))  # cells still near square
    assert max((x1c - x0c) / (y1c - y0c), (y1c - y0c) / (x1c - x0c)) <= 2.05
    painter.resize(1400, 600)  # a taller dock: bigger cells, the plot follows
    qtbot.wait(100)
    x0, _, x1, _ = device_rect(view, box, QRectF(0, 0, len(TOKENS), 1))
    assert abs(view.mapFromScene(box.sceneBoundingRect().topRight()).x() - x1 / ratio) <= 3
