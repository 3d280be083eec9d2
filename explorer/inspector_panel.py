"""The cell inspector beside the matrix: a clicked cell derived from its real inputs (models.explain).

The derivation is a few milliseconds of numpy over one row or column of the trace, from the layer's
weights the worker prepared with the trace (``DisplayTrace.params``); no n×n stage is computed
whole for it above :data:`EXPLAIN_LIMIT` cells (the command line's ``explain`` has no such limit).
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from models.config import InputError
from models.explain import explain

from .heads import array_head
from .widgets.cell_inspector import CellInspector

EXPLAIN_LIMIT = 16_000_000  # cells of one n×n stage (all heads) the window derives a cell from
PROMPT = "Click any cell of any stage: it is derived here from its inputs, with the real numbers."


class InspectorPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.inspector = CellInspector()
        self.note = QLabel(PROMPT)
        self.note.setWordWrap(True)
        # The derivation numbers heads, rows and columns from 0, as `main.py explain` and the .npy files.
        self.indices = QLabel("Indices from 0 everywhere, as in the exported arrays, heads.csv and the grid's titles.")
        self.indices.setObjectName("indicesNote")
        self.indices.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.inspector, 1)
        layout.addWidget(self.indices)
        self.inspector.hide()
        self.indices.hide()

    def explain_cell(self, display, stage, head: int, row: int, col: int) -> None:
        """Show how ``stage``'s cell (query head ``head``, ``row``, ``col``) was computed."""
        if display is None or display.params is None:
            return self._say("This computation cannot be explained cell by cell (no layer weights).")
        trace = display.trace
        too_big = [s.title for s in trace.stages if s.lazy and s.store is not None and
                   s.heads * s.shape[1] * s.shape[2] > EXPLAIN_LIMIT]  # fmt: skip
        if too_big:
            return self._say(f"{len(trace.query_tokens)} tokens: too many to derive a cell here; use "
                             "`python main.py explain --stage … --cell …` for any cell.")  # fmt: skip
        cell = (array_head(stage, head), row, col) if stage.per_head else (row, col)
        try:
            derivation = explain(trace, display.params, stage.name, cell)
        except InputError as exc:
            return self._say(str(exc))
        self.note.hide()
        self.inspector.show()
        self.indices.setVisible(stage.per_head)
        self.inspector.show_derivation(derivation)

    def clear(self) -> None:
        self._say(PROMPT)

    def _say(self, text: str) -> None:
        self.inspector.hide()
        self.indices.hide()
        self.note.setText(text)
        self.note.show()
