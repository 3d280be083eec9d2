"""All stages of the trace, in order, as a clickable list (the breadcrumb of the stepper)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QAbstractItemView, QGroupBox, QListWidget, QSizePolicy, QVBoxLayout, QWidget
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
        self.list.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # as tall as its rows
        self.list.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.list.installEventFilter(self)  # a new font or style sheet: measured again
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
                self.fit_rows()
            self.list.setCurrentRow(trace.index(self.state.stage_name))

    def fit_rows(self) -> None:
        """As tall as every row, each measured in the font and style it is drawn with (the list is the
        map of the whole computation: none is ever cut or scrolled away; it was the first row's
        height times the count, set once, and a font of larger line height cut it)."""
        rows = sum(self.list.sizeHintForRow(i) for i in range(self.list.count()))
        height = rows + 2 * self.list.frameWidth()
        if self.list.height() != height or self.list.minimumHeight() != height:
            self.list.setFixedHeight(height)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt API
        if watched is self.list and event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange,
                                                     QEvent.Type.Polish):  # fmt: skip
            self.fit_rows()
        return super().eventFilter(watched, event)

    def _picked(self, row: int) -> None:
        if 0 <= row < len(self._names):
            self.state.set_stage(self._names[row])
