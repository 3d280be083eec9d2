"""Issue 44 item 9, cramped views, measured through their widgets: the encoder-decoder window's thumbnails
(~30 px in rows 400 px tall), colour-bar numbers printed over each other, the focus chart of a long input
~30 px tall, and the room row labels of a long input reserved (~200 px blank before the maps)."""

from __future__ import annotations

import sys
from pathlib import Path

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QFont, QFontMetricsF
from test_thirty_layers import assert_no_overlap, drawn_labels

from explorer.images.thumbnails import READABLE_SIDE
from explorer.state import Inputs
from explorer.widgets.query_focus import MIN_BARS_PX
from explorer.widgets.rollout_view import LEAST_PLOT_PX
from explorer.widgets.scale_bar import scale_bar
from explorer.widgets.token_axis import TokenAxis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from zoo import table  # noqa: E402

LONG = 1000  # words of a long input: beyond token_axis.MEASURED_LABELS, the row labels thinned with positions


def one_case_per_model_type() -> list[str]:
    """The encoder-decoder rows of the zoo (tests/models/zoo.py), the first of each model type."""
    first: dict[str, str] = {}
    for name, case in table("encdec_refs").items():
        first.setdefault(case[0], name)
    return list(first.values())


@pytest.mark.parametrize("name", one_case_per_model_type())
def test_the_encoder_decoder_window_keeps_readable_thumbnails_and_plots(qtbot, make_window, tmp_path, name):
    pytest.importorskip("transformers")
    from encdec_refs import SOURCE, TARGET, build

    build(tmp_path, name)
    window = make_window(Inputs(sentence=SOURCE, cross_sentence=TARGET, model=str(tmp_path)), persist=False)
    survey = window.windows.open_survey(model=True)
    qtbot.addWidget(survey)
    panels = survey.panels
    qtbot.waitUntil(lambda: all(p.survey is not None and not p.busy for p in panels.values()), timeout=120_000)
    for panel in panels.values():
        panel.tabs.setCurrentWidget(panel.rollout_view)
    qtbot.waitUntil(lambda: all(p.model_view.settled() for p in panels.values()), timeout=30_000)
    qtbot.wait(400)  # the resize pause (frames.DELAYS["resize pause"]) and the thumbnails made again
    qtbot.waitUntil(lambda: all(p.model_view.settled() and not p.busy for p in panels.values()), timeout=30_000)
    for block, panel in panels.items():
        view = panel.model_view
        assert view.side >= READABLE_SIDE and min(view.tile) >= 1, (block, view.side)  # were ~30 px
        assert view.table_plot.getViewBox().height() >= view.layers * 14, block  # the heat table's rows
        assert assert_no_overlap(view.canvas.scene()) > 0, block
        if panel.survey.rollout is not None:  # the encoder's and decoder's (cross attention has none)
            rollout = panel.rollout_view
            for plot in (rollout.rows_plot, rollout.bars_plot):
                assert plot.getViewBox().height() >= LEAST_PLOT_PX - 1, (block, plot.getViewBox().height())
            assert assert_no_overlap(rollout.canvas.scene()) > 0, block
    survey.close()


@pytest.mark.parametrize("height", [12, 20, 30, 45, 70, 160])
def test_a_short_colour_bar_never_prints_its_numbers_over_each_other(qtbot, height):
    canvas = pg.GraphicsLayoutWidget()
    qtbot.addWidget(canvas)
    plot = canvas.addPlot()
    for side in ("left", "bottom"):  # the bar's numbers alone
        plot.hideAxis(side)
    image = pg.ImageItem()
    plot.addItem(image)
    bar = scale_bar(plot, "", image=image)
    bar.setLevels((0.0, 0.47))  # pyqtgraph's own axis: "0.0 0.1 … 0.4" in 30 px, each over the next
    canvas.resize(300, height + 40)
    canvas.show()
    qtbot.waitUntil(lambda: bar.axis.height() > 0)
    qtbot.wait(50)
    assert abs(bar.axis.height() - height) < 40, bar.axis.height()
    assert assert_no_overlap(canvas.scene()) >= (2 if height >= 45 else 0)
    # pyqtgraph's text rectangles are 0.8 of a line (AxisItem.generateDrawSpecs): labels a line apart at least
    line = QFontMetricsF(bar.axis.style["tickFont"] or QFont()).height()
    centres = sorted(rect.center().y() for _text, rect in drawn_labels(bar.axis))
    assert all(b - a >= line for a, b in zip(centres, centres[1:])), (line, centres)  # 12.7 px apart before


def test_the_focus_chart_of_a_long_input_keeps_its_bars_tall(qtbot, make_window, settle):
    words = " ".join(f"word{i}" for i in range(LONG))
    window = make_window(Inputs(sentence=words), stage="weights")
    window.resize(1400, 900)
    window.state.set_query(500)
    window.state.inspect(0, 500, 3)  # the inspector opens below the focus chart and takes its height
    settle(window)
    chart = window.focus_panel.chart
    qtbot.waitUntil(lambda: window.focus_panel.weights_row is not None, timeout=15_000)
    qtbot.wait(200)
    box = chart.getPlotItem().getViewBox()
    assert box.height() >= MIN_BARS_PX - 1, box.height()  # were ~30 px under the keys' upright labels
    assert assert_no_overlap(chart.scene()) >= 3


def test_the_row_labels_of_a_long_input_reserve_what_they_draw(qtbot):
    canvas = pg.GraphicsLayoutWidget()
    qtbot.addWidget(canvas)
    axis = TokenAxis("left")
    plot = canvas.addPlot(axisItems={"left": axis})
    labels = tuple(("x" if i % 7 else "i") * (2 + i % 11) for i in range(16384))  # 12 "i"s are narrow
    axis.set_labels(labels)
    plot.setYRange(0, len(labels), padding=0)
    canvas.resize(700, 500)
    canvas.show()
    qtbot.waitUntil(lambda: axis.height() > 100)
    drawn = axis.drawn_labels()
    assert len(drawn) >= 5
    widest = max(rect.width() for rect, _text in drawn)
    # Reserved before: 12 × the width of "W" and the position prefix, ~60 px more than drawn here.
    assert axis.label_room() - widest <= axis.style["tickTextOffset"][0] + 10 + 12, (axis.label_room(), widest)
    assert axis.label_room() >= widest
