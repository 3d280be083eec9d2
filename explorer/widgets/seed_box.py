"""A box for a seed from 0 to 2**63-1 (what ``export --seed`` and torch take).

QSpinBox holds 32-bit integers only: a session's seed of 2**40 made the window fail with an
OverflowError. This line edit has the part of QSpinBox's API the settings panel uses
(``value``, ``setValue``, ``valueChanged``, ``minimum``, ``maximum``), with Python integers.
"""

from __future__ import annotations

from PySide6.QtCore import QRegularExpression, Signal
from PySide6.QtGui import QRegularExpressionValidator
from PySide6.QtWidgets import QLineEdit, QWidget


class SeedBox(QLineEdit):
    valueChanged = Signal(object)  # a Python int: may exceed 32 bits

    def __init__(self, maximum: int, tip: str = "", parent: QWidget | None = None) -> None:
        super().__init__("0", parent)
        self._maximum, self._value = maximum, 0
        self.setValidator(QRegularExpressionValidator(QRegularExpression(rf"\d{{1,{len(str(maximum))}}}"), self))
        self.setToolTip(tip)
        self.editingFinished.connect(self._commit)
        self.textEdited.connect(self._commit)

    def minimum(self) -> int:
        return 0

    def maximum(self) -> int:
        return self._maximum

    def value(self) -> int:
        return self._value

    def setValue(self, value: int) -> None:  # noqa: N802 - the QSpinBox name
        value = min(max(0, int(value)), self._maximum)
        if str(value) != self.text():
            self.setText(str(value))
        if value != self._value:
            self._value = value
            self.valueChanged.emit(value)

    def _commit(self, *_) -> None:
        text = self.text()
        if text.isdigit():
            self.setValue(int(text))
