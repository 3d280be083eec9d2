"""The Why panel in a dock beside the inspector (File → Why does this head attend here?…, issue 33).

Hidden at start, so the inspector keeps its room; while shown, every clicked cell of a score or weight
stage is split (off the GUI thread, explorer.panels.why_panel). Handed the state, the read jobs and the
worker's loaded models, never the window.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QWidget

from explorer.panels.why_panel import WhyPanel

OPEN_WIDTH = 560  # px: the table of a 2-layer, 4-head model readable at once


class WhyDock(QDockWidget):
    def __init__(self, state, jobs, models, parent: QWidget | None = None) -> None:
        """``models``: the worker's loaded models (``models.model(name, device)``, explorer.engine)."""
        super().__init__("Why does this head attend here?", parent)
        self.setObjectName("whyDock")
        self.state, self.models = state, models
        self.panel = WhyPanel(jobs=jobs)
        self.setWidget(self.panel)
        self.clicked: tuple | None = None  # the last clicked cell: (display, stage, head, row, col)
        self.visibilityChanged.connect(lambda shown: shown and self.split_clicked())
        state.trace_changed.connect(lambda _display: self.panel.clear())  # its numbers are gone
        self.panel.open_head.connect(self.open_head)

    def open(self) -> WhyDock:
        """Show the dock, splitting the last clicked score, wide enough to read its table. Shown the
        first time it took the ~130 px left beside the main column (which cannot be narrower): the
        table was a sliver. The window grows by what the dock lacks when the screen has room, else
        the dock floats beside it."""
        first = not self.isVisible()
        self.show()
        self.raise_()
        window = self.parentWidget()
        if first and window is not None and not self.isFloating() and self.width() < OPEN_WIDTH:
            lacking = OPEN_WIDTH - self.width()
            room = window.screen().availableGeometry().width() if window.screen() is not None else 0
            if not window.isMaximized() and window.width() + lacking <= room:
                window.resize(window.width() + lacking, window.height())
                window.resizeDocks([self], [OPEN_WIDTH], Qt.Orientation.Horizontal)
            else:
                self.setFloating(True)
                self.resize(OPEN_WIDTH, max(400, window.height() * 4 // 5))
        return self

    def cell_clicked(self, display, stage, head: int, row: int, col: int) -> None:
        self.clicked = (display, stage, head, row, col)
        self.split_clicked()

    def split_clicked(self) -> None:
        if self.clicked is None or not self.isVisible():
            return  # nothing is computed for a panel nobody sees
        display, stage, head, row, col = self.clicked
        if display is self.state.display:
            self.panel.show_cell(display, stage, head, row, col, self.model_of(display))

    def model_of(self, display):
        """The loaded model that made ``display`` (from the worker's cache); None: the toy."""
        spec = getattr(display, "request", None)
        if spec is None or not getattr(spec, "model", None):
            return None
        return lambda: self.models.model(spec.model, spec.device)

    def open_head(self, layer: int, head: int, position: int) -> None:
        """Show ``head`` of ``layer``: its weights, its row at query ``position`` focused (a click on a head)."""
        self.state.update_inputs(layer=layer)
        self.state.set_stage("weights")
        self.state.set_focus_head(head)
        self.state.set_query(position)
