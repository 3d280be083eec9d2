"""Issue 44, "what a newcomer trips over, round 4": the pictures (each test failed before its fix)."""

from __future__ import annotations

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
