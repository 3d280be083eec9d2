"""The cell inspector beside the matrix: a clicked cell derived from its real inputs (models.reads.explain).

The derivation is a few milliseconds of numpy over one row or column of the trace, computed off the
GUI thread when the panel is handed the window's read jobs (explorer.jobs), from the layer's
weights the worker prepared with the trace (``DisplayTrace.params``); no n×n stage is computed
whole for it above :data:`EXPLAIN_LIMIT` cells (the command line's ``explain`` has no such limit).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Signal
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from explorer.heads import array_head
from explorer.widgets.cell_inspector import CellInspector
from explorer.widgets.splitter_room import content_height, give_room
from models.config import InputError
from models.reads.explain import explain

EXPLAIN_LIMIT = 16_000_000  # cells of one n×n stage (all heads) the window derives a cell from
LEAST_CAP = 320  # px: the most the derivation's least width asks of the window (a wider formula scrolls)
PROMPT = "Click any cell of any stage: it is derived here from its inputs, with the real numbers."


class InspectorPanel(QWidget):
    shown = Signal()  # a derivation is on the panel (the window gives it room)

    def __init__(self, parent: QWidget | None = None, jobs=None) -> None:
        """``jobs``: the window's :class:`explorer.jobs.ReadJobs` (derive off the GUI thread), or
        None (derive in the caller's turn: a panel on its own)."""
        super().__init__(parent)
        self.jobs = jobs
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

    def follow(self, state, scroll, splitter) -> None:
        """Derive the state's inspected cell (cleared when a new run came: its numbers are gone), and
        give it the height it needs at once, up to 60 % of the column, from the panel above it in
        ``splitter`` (it was 60-70 px tall at 1400 × 900: only its heading showed)."""

        def inspect(cell) -> None:
            display = state.display
            if cell is None or display is None or display.generation != cell.generation:
                self.clear()
            else:
                self.explain_cell(display, cell.stage, cell.head, cell.row, cell.col)

        state.inspector.cell_changed.connect(inspect)
        self.shown.connect(lambda: give_room(splitter, content_height(self, scroll.viewport().width())))

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
        params, name, per_head = display.params, stage.name, stage.per_head

        def derive():  # the trace's numbers: on the read thread when there is one
            try:
                return explain(trace, params, name, cell), per_head
            except InputError as exc:
                return str(exc), per_head

        if self.jobs is None:
            return self._show(derive())
        self.jobs.ask("explain", derive, self._show)

    def _show(self, answer) -> None:
        derivation, per_head = answer
        if isinstance(derivation, str):  # a one-line refusal
            return self._say(derivation)
        self.note.hide()
        self.inspector.show()
        self.indices.setVisible(per_head)
        self.inspector.show_derivation(derivation)
        self.shown.emit()

    def clear(self) -> None:
        if self.jobs is not None:
            self.jobs.cancel("explain")  # a derivation of the old numbers never shows
        self._say(PROMPT)

    def _say(self, text: str) -> None:
        self.inspector.hide()
        self.indices.hide()
        self.note.setText(text)
        self.note.show()


class InspectorScroll(QScrollArea):
    """The panel's scroll area, never narrower than the derivation's least width (a 960 px window gave it
    200 px for 210: a horizontal scroll bar), up to :data:`LEAST_CAP`."""

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        hint = super().minimumSizeHint()
        if self.widget() is None:
            return hint
        least = self.widget().minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
        return QSize(max(hint.width(), min(least, LEAST_CAP)), hint.height())

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:  # the derivation's least width may have changed
            self.updateGeometry()
        return super().event(event)
