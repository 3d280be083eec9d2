"""The status-bar message: what was computed, where and how fast; errors in red."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget


class StatusLine(QLabel):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("statusLine")
        self.is_error = False

    def show_info(self, text: str) -> None:
        self._show(text, error=False)

    def show_error(self, text: str) -> None:
        self._show(f"⚠ {text}", error=True)

    def _show(self, text: str, error: bool) -> None:
        self.is_error = error
        self.setProperty("error", error)
        self.style().unpolish(self)  # re-apply the style sheet's [error="true"] rule
        self.style().polish(self)
        self.setText(text)
        self.setToolTip(text)
