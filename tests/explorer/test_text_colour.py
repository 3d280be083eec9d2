"""Every plot's text near black on white (titles, axes, ticks, legends): pyqtgraph's default grey
(150, 150, 150) read poorly, e.g. the next-token bars' labels and every plot title."""

import pyqtgraph as pg
from PySide6.QtGui import QColor

from explorer.widgets.colormaps import TEXT_RGB
from explorer.widgets.topk_bars import TopKBars


def _dark(colour: QColor) -> bool:
    return max(colour.red(), colour.green(), colour.blue()) <= 60


def test_titles_axes_and_ticks_are_near_black(qtbot):
    bars = TopKBars()
    qtbot.addWidget(bars)
    bars.set_bars(["a", "b"], [0.6, 0.3], chosen=0, title="Next token")
    plot = bars.plot.getPlotItem()
    for side in ("left", "bottom"):
        assert _dark(plot.getAxis(side).textPen().color())
    assert "#191919" in plot.titleLabel.item.toHtml()  # the title drawn in TEXT_RGB
    fresh = pg.PlotWidget(title="any plot")
    qtbot.addWidget(fresh)
    assert _dark(fresh.getPlotItem().getAxis("left").textPen().color())
    assert pg.mkColor(pg.getConfigOption("foreground")).getRgb()[:3] == TEXT_RGB
