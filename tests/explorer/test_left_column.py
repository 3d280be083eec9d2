"""The left column's least width follows its panels: at once when they need more, once it has held
for the "shrink after" delay when they need less (a model's texts go and come back within a switch)."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from explorer.widgets.frames import DELAYS
from explorer.widgets.left_column import left_column


def test_the_column_widens_at_once_and_narrows_once_the_narrower_minimum_has_held(qtbot):
    text = QLabel("short")
    host = QWidget()
    qtbot.addWidget(host)
    row = QHBoxLayout(host)
    row.addWidget(left_column([text], QLabel("stages")))
    row.addWidget(QLabel("the rest"))
    host.show()
    qtbot.waitExposed(host)
    narrow = host.minimumSizeHint().width()

    text.setText("a much longer text that the column must make room for at once")
    qtbot.wait(10)
    wide = host.minimumSizeHint().width()
    assert wide > narrow + 100  # at once: no panel is ever cut at the right

    text.setText("short")  # and back within a switch: nothing is laid out again yet
    qtbot.wait(10)
    assert host.minimumSizeHint().width() == wide
    # once the narrower minimum has held, the window may be narrowed again (it stayed wide for good)
    qtbot.waitUntil(lambda: host.minimumSizeHint().width() == narrow, timeout=DELAYS["shrink after"] + 2000)
