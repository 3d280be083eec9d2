"""The shown stage: previous/next, its title and position, the formula with the actual shapes,
and one plain-language sentence. (The clickable list of all stages is widgets/stage_list.py.)"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStyle,
    QStyleOptionToolButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from models.engine.trace import Stage

NBSP = "\u00a0"


def formula_line(stage: Stage) -> str:
    """``S = Q Kᵀ / √d_k      (6×24)·(24×6) → 6×6      per head, × 2``: the line wraps only between
    these three parts, never inside one (each joined by no-break spaces), and between the equations
    of a formula that has two (``‖a_ij f_h(x_j)‖ = …,  f_h(x) = …``: one part of 64 characters, it was
    cut at the right in a window half a 1920 px screen wide)."""
    equations = [e.replace(" ", NBSP) for e in stage.formula.split(",  ")]
    parts = [f",{NBSP} ".join(equations), stage.shapes.replace(" ", NBSP)]
    parts.append(f"per head, × {stage.heads}".replace(" ", NBSP) if stage.per_head else "")
    return "      ".join(p for p in parts if p)


class StepButton(QToolButton):
    """"◀ Previous", or "◀" where there is no room for it (a window half a 1920 px screen wide; the
    stepper chooses): it never asks for more than the short text's width as its minimum. (A tool
    button: a push button is at least 80 px wide in most styles, whatever its text.)"""

    def __init__(self, long: str, short: str):
        super().__init__()
        self.long, self.short = long, short
        self.setText(long)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)  # a tool button's is fixed

    def width_for(self, text: str) -> int:
        """The width QToolButton.sizeHint gives ``text`` (measured, never set: that would ask for a layout)."""
        option = QStyleOptionToolButton()
        self.initStyleOption(option)
        option.text = text
        metrics = self.fontMetrics()
        content = QSize(metrics.size(Qt.TextFlag.TextShowMnemonic, text).width() + 8, metrics.height() + 6)
        return self.style().sizeFromContents(QStyle.ContentsType.CT_ToolButton, option, content, self).width()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(self.width_for(self.short), self.sizeHint().height())

    def set_compact(self, compact: bool) -> None:
        if self.text() != (self.short if compact else self.long):
            self.setText(self.short if compact else self.long)


class StageStepper(QWidget):
    """Given the state (duck-typed), it follows trace and stage changes and steps the stage."""

    def __init__(self, state, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.prev_button = StepButton("◀ Previous", "◀")
        self.next_button = StepButton("Next ▶", "▶")
        for button, tip in ((self.prev_button, "Previous stage (Left; Home = first)"),
                            (self.next_button, "Next stage (Right; End = last)")):  # fmt: skip
            button.setToolTip(tip)
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keys stay with the window's stage shortcuts
        self.title = QLabel()
        self.title.setObjectName("stageTitle")
        self.position = QLabel()
        self.position.setObjectName("stagePosition")
        self.position.setWordWrap(True)  # "stage 9 of 14 · array 2×14×14" on two lines when narrow
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
        heading.addWidget(self.position, 1)  # the room left: on one line when it fits
        heading.addWidget(self.next_button)
        self.heading = heading
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

    def resizeEvent(self, event):  # noqa: N802 - Qt API
        self._fit_buttons(event.size().width())
        super().resizeEvent(event)

    def _fit_buttons(self, width: int) -> None:
        """Short button texts when the long ones, the trace's widest title and its widest position part
        would not fit in ``width`` side by side: decided from the width and the trace alone (never from
        what it changes), the same on every stage (the Next button changed under the mouse)."""
        display = self.state.display
        if display is None:
            return
        stages = display.trace.stages
        titles = [stage.title for stage in stages]
        parts = [f"array {'×'.join(str(s) for s in stage.shape)}" for stage in stages]
        parts.append(f"stage {len(stages)} of {len(stages)} ·")  # the position's two lines at most
        needed = 0
        for label, texts in ((self.title, titles), (self.position, parts)):
            metrics, margins = label.fontMetrics(), label.contentsMargins()
            needed += max(metrics.horizontalAdvance(t) for t in texts) + margins.left() + margins.right()
        needed += sum(button.width_for(button.long) for button in (self.prev_button, self.next_button))
        needed += 8 + 4 * max(0, self.heading.spacing())  # the space after Previous and between the items
        for button in (self.prev_button, self.next_button):
            button.set_compact(width < needed)

    def refresh(self, *_) -> None:
        display = self.state.display
        if display is None:
            return
        trace = display.trace
        at = trace.index(self.state.stage_name)
        stage = trace[self.state.stage_name]
        self.title.setText(stage.title)
        shape = "×".join(str(s) for s in stage.shape)
        # Two lines at most when narrow, broken at the dot: "stage 9 of 14 ·" over "array 2×14×14"
        self.position.setText(f"stage {at + 1} of {len(trace.stages)} · array {shape}".replace(" ", NBSP)
                              .replace(f"{NBSP}·{NBSP}", f"{NBSP}· "))
        self.formula.setText(formula_line(stage))
        self.description.setText(stage.description)
        self.prev_button.setEnabled(at > 0)
        self.next_button.setEnabled(at < len(trace.stages) - 1)
        self._fit_buttons(self.width())
