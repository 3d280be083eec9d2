"""The focus panel with Difference ticked (issue 18): edited − original weights can be negative, and
a negative bar is drawn below a zero line, inside the chart, in the diverging map's negative colour."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF

from explorer.widgets.colormaps import sign_colours
from explorer.widgets.query_focus import bar_range
from models.engine.pixels import reduce_row
from tests.explorer.pixels import device_rect, grab
from tests.explorer.test_experiment import _difference_of_weights  # its edit: head 1, query 2, feature 3 of Q

EDIT = (1, 2, 3)  # head 1, query 2, feature 3 of Q: query 2's weights in head 1 change


def _focused_difference(qtbot, make_window, settle, monkeypatch):
    window = make_window()
    _difference_of_weights(window, settle, monkeypatch)
    window.state.set_focus_head(EDIT[0])
    window.state.set_query(EDIT[1])
    settle(window)
    panel = window.focus_panel
    expected = window.state.display.trace["weights"].head(EDIT[0])[EDIT[1]]
    qtbot.waitUntil(lambda: panel.weights_row is not None and np.array_equal(panel.weights_row, expected))
    return window, panel, expected


def test_a_negative_difference_is_a_bar_below_zero_inside_the_chart(qtbot, make_window, settle, monkeypatch):
    window, panel, expected = _focused_difference(qtbot, make_window, settle, monkeypatch)
    assert expected.min() < 0 < expected.max()  # the edit moved weight from some keys to others
    heights = np.asarray(panel.bars.opts["height"])
    np.testing.assert_array_equal(heights, expected)  # 7 keys: one bar each, signed
    box = panel.chart.getPlotItem().getViewBox()
    (_, _), (low, high) = box.viewRange()
    assert low < heights.min() and high > heights.max()  # every bar, down or up, is on the chart
    assert panel.zero_line.isVisible() and panel.zero_line.value() == 0
    negative, positive = sign_colours()
    colours = [tuple(b.color().getRgb()[:3]) for b in panel.bars.opts["brushes"]]
    assert colours == [negative if h < 0 else positive for h in heights]
    # And on screen: the middle of the lowest bar is painted in the negative colour.
    panel.chart.resize(400, 300)
    qtbot.wait(50)
    j = int(np.argmin(heights))
    h = float(heights[j])
    x0, y0, x1, y1 = device_rect(panel.chart, box, QRectF(j + 0.4, 0.75 * h, 0.2, -0.5 * h))
    image = grab(panel.chart)
    middle = image[(y0 + y1) // 2, (x0 + x1) // 2]
    assert tuple(int(c) for c in middle) == negative


def test_unsigned_weights_keep_the_range_from_zero_and_one_colour(make_window):
    window = make_window()
    window.state.set_stage("weights")
    window.state.set_query(2)
    panel = window.focus_panel
    (_, _), (low, _) = panel.chart.getPlotItem().getViewBox().viewRange()
    assert low == 0 and not panel.zero_line.isVisible() and panel.bars.opts["brushes"] is None


def test_a_per_token_stage_shows_its_negative_features(make_window, qtbot):
    window = make_window()
    window.state.set_stage("embeddings")
    window.state.set_query(1)
    panel = window.focus_panel
    qtbot.waitUntil(lambda: panel.vector is not None)
    assert panel.vector.min() < 0
    (_, _), (low, high) = panel.chart.getPlotItem().getViewBox().viewRange()
    assert low < panel.vector.min() and high > panel.vector.max()


def test_many_signed_keys_keep_the_most_negative_of_each_block():
    row = np.zeros(4096, dtype=np.float32)
    row[100], row[3000] = -0.75, 0.25
    heights, step = reduce_row(row, 512, signed=True)
    assert step == 8 and heights.min() == -0.75 and heights.max() == 0.25
    assert reduce_row(row, 512)[0].min() == 0  # weights (unsigned): each block's largest
    assert bar_range(np.array([-0.5, 1.0]))[0] < -0.5 and bar_range(np.array([0.2, 1.0]))[0] == 0


def test_the_difference_table_lists_the_largest_changes_and_claims_no_sum(qtbot, make_window, settle, monkeypatch):
    """Under Difference the table below the bars listed "o_i = Σ_j a_ij v_j, largest weights first"
    (the values may have changed too, so Δo_i is not Σ_j Δa_ij v_j) and the sum read −0.0000."""
    window, panel, expected = _focused_difference(qtbot, make_window, settle, monkeypatch)
    text = panel.sum_text.text()
    assert "largest changes first" in text and "largest weights first" not in text
    assert "×&nbsp;v<sub>" not in text  # no product with a value row
    biggest = int(np.argmax(np.abs(expected)))
    first_value = text.split("<td align=right>")[1].split("</td>")[0]
    assert float(first_value) == float(f"{expected[biggest]:.4f}")  # the largest change by size, first
    assert "−0.0000" not in text and "-0.0000" not in text
    assert "changed (edited − original)" in panel.header.text()
    assert panel.chart.getPlotItem().getAxis("left").labelText == "Δ weight a_ij"  # from the request, not the signs


def test_the_focus_charts_top_tick_label_is_whole(make_window, settle):
    """The weights' range often ends on a tick (0.35): its label, centred on the top edge of the plot,
    was cut in half by the chart's edge. The plot now leaves room above it for half a line."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QFontMetricsF

    from explorer.state import Inputs

    window = make_window(Inputs(sentence="The cat sat on the mat."))
    settle(window)
    chart = window.focus_panel.chart
    box = chart.getPlotItem().getViewBox()
    top_value = box.viewRange()[1][1]
    top_px = chart.mapFromScene(box.mapViewToScene(QPointF(0, top_value))).y()
    axis = chart.getAxis("left")
    half_line = QFontMetricsF(axis.style["tickFont"] or chart.font()).height() / 2
    assert top_px >= half_line  # the label centred on it fits inside the chart
