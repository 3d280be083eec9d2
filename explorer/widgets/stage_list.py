"""All stages of the trace, in order, as a clickable list (the breadcrumb of the stepper)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QGroupBox, QListWidget, QVBoxLayout, QWidget
from superqt.utils import signals_blocked


class StageList(QGroupBox):
    """Given the state (duck-typed), it follows trace and stage changes and sets the stage."""

    def __init__(self, state, parent: QWidget | None = None):
        super().__init__("Stages", parent)
        self.state = state
        self._names: tuple[str, ...] = ()
        self.list = QListWidget()
        self.list.setObjectName("stageList")
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Left/Right/Home/End stay with the stage keys
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list)
        self.list.currentRowChanged.connect(self._picked)
        state.trace_changed.connect(self.refresh)
        state.stage_changed.connect(self.refresh)

    def refresh(self, *_) -> None:
        display = self.state.display
        if display is None:
            return
        trace = display.trace
        with signals_blocked(self.list):
            if trace.names != self._names:
                self.list.clear()
                for i, stage in enumerate(trace.stages):
                    self.list.addItem(f"{i + 1:>2}  {stage.title}")
                    self.list.item(i).setToolTip(f"{stage.formula}\n{stage.description}")
                self._names = trace.names
                # Tall enough for every stage: the list is the map of the whole computation.
                rows = self.list.sizeHintForRow(0) * len(self._names) + 2 * self.list.frameWidth() + 4
                self.list.setMinimumHeight(rows)
            self.list.setCurrentRow(trace.index(self.state.stage_name))

    def _picked(self, row: int) -> None:
        if 0 <= row < len(self._names):
            self.state.set_stage(self._names[row])
