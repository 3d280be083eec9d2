"""A box for each input option that has no control written for it, made from its row of the option
table (models/fields.py: ``FIELDS``): a new input option is one row, and the window offers it with
nothing else to write (explorer/inputs.py). The settings panel lays these out under its own boxes.

A flag is a checkbox, a row with choices a list, an integer or a number a spin box over the row's
``window_range``, anything else a line of text. A row that applies only to the toy engine is
disabled while a model is chosen (and one only for models, while the toy is).
"""

from __future__ import annotations

from argparse import ArgumentTypeError
from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox, QWidget
from superqt.utils import signals_blocked

from models.fields import Field

INT_LIMIT = 2**31 - 1  # a QSpinBox holds 32-bit integers


class RowBox:
    """``widget`` showing one input; a change of it becomes ``changed(value)``."""

    def __init__(self, row: Field, changed: Callable[[Any], None]):
        self.row = row
        low, high = row.window_range
        if row.flag:
            box = QCheckBox()
            box.toggled.connect(changed)
        elif row.choices:
            box = QComboBox()
            for choice in row.choices:
                box.addItem(choice, choice)
            box.currentIndexChanged.connect(lambda i: changed(box.itemData(i)))
        elif row.type is int:
            box = QSpinBox()
            box.setRange(int(max(low, -INT_LIMIT)) if low is not None else -INT_LIMIT,
                         int(min(high, INT_LIMIT)) if high is not None else INT_LIMIT)  # fmt: skip
            box.valueChanged.connect(changed)
        elif row.type is float:
            box = QDoubleSpinBox()
            box.setDecimals(3)
            box.setRange(low if low is not None else -1e9, high if high is not None else 1e9)
            box.valueChanged.connect(changed)
        else:  # text, or a list written as text ("3,4": parsed by the row's type, as on the command line)
            box = QLineEdit()
            box.editingFinished.connect(lambda: self._parsed(box, changed))
        box.setToolTip(row.help)
        self.widget: QWidget = box

    def _parsed(self, box: QLineEdit, changed: Callable[[Any], None]) -> None:
        try:
            value = self.row.type(box.text()) if self.row.type is not None else box.text()
        except (ArgumentTypeError, ValueError) as exc:  # kept as it was; the box says why
            box.setToolTip(f"{exc}\n{self.row.help}")
            return
        box.setToolTip(self.row.help)
        changed(value)

    @property
    def label(self) -> str:
        return self.row.dest.replace("_", " ")

    def show(self, value: Any, uses_model: bool) -> None:
        """Show ``value`` without echoing it back; enabled when the row applies to what is computed."""
        box = self.widget
        with signals_blocked(box):
            if isinstance(box, QCheckBox):
                box.setChecked(bool(value))
            elif isinstance(box, QComboBox):
                box.setCurrentIndex(max(0, box.findData(value)))
            elif isinstance(box, QLineEdit):
                text = ",".join(map(str, value)) if isinstance(value, tuple) else "" if value is None else str(value)
                box.setText(text)
            elif value is not None:
                box.setValue(value)
        box.setEnabled(self.row.applies == "both" or (self.row.applies == "model") == uses_model)
