"""The wrapping row of controls: its height for a width follows its controls' texts and visibility
(the height is kept between Qt's many asks of one layout pass, and forgotten when a control changes)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from explorer.widgets.control_row import ControlRow


def test_the_height_for_a_width_follows_texts_visibility_and_new_controls(qtbot):
    host = QWidget()
    qtbot.addWidget(host)
    row = ControlRow(host)
    first, second = QPushButton("one"), QLabel("two")
    row.addWidget(first)
    row.addWidget(second)
    width = first.sizeHint().width() + second.sizeHint().width() + 40
    one_line = row.heightForWidth(width)
    assert one_line == row.heightForWidth(width)  # asked again: the same

    second.setText("a label far too long to stay on the first line beside the button")
    two_lines = row.heightForWidth(width)
    assert two_lines > one_line  # it wrapped: the height was not the one kept for the old text

    second.hide()
    assert row.heightForWidth(width) < two_lines  # a hidden control takes no room

    second.show()
    row.addWidget(QPushButton("a third button, added later, that must wrap"))
    assert row.heightForWidth(width) > two_lines  # three lines now
    assert row.heightForWidth(10_000) == one_line  # wide enough: one line
