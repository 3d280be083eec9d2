"""What a real X window showed and the offscreen tests did not (issue 44, points 15-19 and 22): the
size and order the windows open in, the Why dock's room, a clicked head's outline, the nits."""

from __future__ import annotations

import dataclasses

from PySide6.QtWidgets import QApplication

from explorer.widgets.window_size import LARGEST
from explorer.window import MainWindow
from tests.explorer.conftest import SMALL

INDUCTION = dataclasses.replace(SMALL, model="induction", sentence="The animal didn't cross the street.")


def test_timeline_at_start_opens_behind_nothing_and_leaves_the_window_its_size(qtbot, settle, settings):
    """``--model induction --timeline``: the timeline was opened before the main window was shown; its
    step (a checkpoint folder) made the model's box hold the room of widgets never laid out (Qt's
    640 px default), so the window opened 1,945 px wide, and on top of the timeline."""
    from explorer.actions.timeline_actions import start_timeline

    window = MainWindow(settings, INDUCTION, persist=False)
    qtbot.addWidget(window)
    settle(window)  # not shown yet: as main.py builds it
    timeline = start_timeline(window, step=None)
    qtbot.addWidget(timeline)
    assert window.model_chooser.layer.minimumWidth() < 300  # held while the step's folder loads: was 640
    qtbot.wait(50)
    settle(window)
    assert window.isVisible() and timeline.isVisible()
    assert window.width() <= LARGEST[0] and window.height() <= LARGEST[1]
    assert window.splitter.sizes()[0] < 450  # the settings column: ~330 px, was ~870
    assert QApplication.activeWindow() is timeline  # in front of the window it follows
