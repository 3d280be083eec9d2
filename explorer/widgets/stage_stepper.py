"""The shown stage: previous/next, its title and position, the formula with the actual shapes,
and one plain-language sentence. (The clickable list of all stages is widgets/stage_list.py.)"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from models.engine.trace import Stage

NBSP = "\u00a0"


def formula_line(stage: Stage) -> str:
    """``S = Q Kᵀ / √d_k      (6×24)·(24×6) → 6×6      per head, × 2``: the line wraps only between
    these three parts, never inside one (each joined by no-break spaces)."""
    parts = [stage.formula, stage.shapes, f"per head, × {stage.heads}" if stage.per_head else ""]
    return "      ".join(p.replace(" ", NBSP) for p in parts if p)


class StageStepper(QWidget):
    """Given the state (duck-typed), it follows trace and stage changes and steps the stage."""

    def __init__(self, state, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.prev_button = QPushButton("◀ Previous")
        self.next_button = QPushButton("Next ▶")
        for button, tip in ((self.prev_button, "Previous stage (Left; Home = first)"),
                            (self.next_button, "Next stage (Right; End = last)")):  # fmt: skip
            button.setToolTip(tip)
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keys stay with the window's stage shortcuts
        self.title = QLabel()
        self.title.setObjectName("stageTitle")
        self.position = QLabel()
        self.position.setObjectName("stagePosition")
        self.formula = QLabel()
        self.formula.setObjectName("formula")
        self.formula.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.formula.setWordWrap(True)  # a long formula with big shapes wraps rather than widening the window
        self.description = QLabel()
        self.description.setObjectName("description")
        self.description.setWordWrap(True)
        for label in (self.formula, self.description):
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)

        heading = QHBoxLayout()
        heading.addWidget(self.prev_button)
        heading.addSpacing(8)
        heading.addWidget(self.title)
        heading.addWidget(self.position)
        heading.addStretch(1)
        heading.addWidget(self.next_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(heading)
        layout.addWidget(self.formula)
        layout.addWidget(self.description)

        self.prev_button.clicked.connect(lambda: state.step(-1))
        self.next_button.clicked.connect(lambda: state.step(+1))
        state.trace_changed.connect(self.refresh)
        state.stage_changed.connect(self.refresh)

    def refresh(self, *_) -> None:
        display = self.state.display
        if display is None:
            return
        trace = display.trace
        at = trace.index(self.state.stage_name)
        stage = trace[self.state.stage_name]
        self.title.setText(stage.title)
        shape = "×".join(str(s) for s in stage.shape)
        self.position.setText(f"stage {at + 1} of {len(trace.stages)} · array {shape}")
        self.formula.setText(formula_line(stage))
        self.description.setText(stage.description)
        self.prev_button.setEnabled(at > 0)
        self.next_button.setEnabled(at < len(trace.stages) - 1)
