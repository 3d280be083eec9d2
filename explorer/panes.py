"""The view state of the window's panes, kept in the state (``ExplorerState.stepper``): Qt-free,
one psygnal event per fact, as the rest of explorer/state.py.

The stepper's matrix view draws a stage in several event-loop turns (phases of explorer/widgets/frames.py), so
what is on screen can lag ``state.stage_name`` and ``state.display``: :attr:`StepperPane.shown` is
the stage whose images, titles and grid are all set now, and the run (generation) it belongs to.
The matrix view sets it when its images are set; the hover line, the numbers in cells, zooming,
edits, the inspector and screenshots read it here.
"""

from __future__ import annotations

from typing import NamedTuple

from psygnal import Signal

from models.engine.trace import Stage


class ShownStage(NamedTuple):
    """What the stepper's heatmaps show: ``stage`` of the run numbered ``generation``."""

    generation: int
    stage: Stage


class StepperPane:
    """The stepper's view state: the stage on screen (None until the first one is drawn)."""

    shown_changed = Signal(object)  # ShownStage: another stage (or another run's) is now on screen

    def __init__(self) -> None:
        self._shown: ShownStage | None = None

    @property
    def shown(self) -> ShownStage | None:
        return self._shown

    @property
    def stage(self) -> Stage | None:
        """The stage on screen, or None before the first."""
        return self._shown.stage if self._shown is not None else None

    @property
    def generation(self) -> int:
        """The run (generation) whose stage is on screen; 0 before the first."""
        return self._shown.generation if self._shown is not None else 0

    def set_shown(self, generation: int, stage: Stage) -> bool:
        """``stage`` of run ``generation`` is on screen now; one event when that changed (the same
        stage drawn again, for another head or colour scale, is no change). True when it changed."""
        shown = self._shown
        if shown is not None and shown.generation == generation and shown.stage is stage:
            return False
        self._shown = ShownStage(generation, stage)
        self.shown_changed.emit(self._shown)
        return True


class Status(NamedTuple):
    """What the status line says: ``text``, whether it is an error, the notices shown before it."""

    text: str = ""
    error: bool = False
    notices: tuple[str, ...] = ()


class StatusPane:
    """The status line's view state (the widget, explorer/widgets/status_line.py, only draws it)."""

    changed = Signal(object)  # Status

    def __init__(self) -> None:
        self.status = Status()

    def show_info(self, text: str, notices: tuple[str, ...] | list[str] = ()) -> None:
        self._set(Status(text, False, tuple(notices)))

    def show_error(self, text: str) -> None:
        self._set(Status(text, True))

    def _set(self, status: Status) -> None:
        self.status = status
        self.changed.emit(status)  # the same message again is shown again (and read by tests)


class InspectedCell(NamedTuple):
    """The cell the inspector derives: ``stage`` of run ``generation``, ``(head, row, col)``."""

    generation: int
    stage: Stage
    head: int
    row: int
    col: int


class InspectorPane:
    """The inspector's view state: the cell it explains, or None (nothing clicked, or the run gone)."""

    cell_changed = Signal(object)  # InspectedCell or None

    def __init__(self) -> None:
        self.cell: InspectedCell | None = None

    def set_cell(self, cell: InspectedCell | None) -> None:
        if cell != self.cell or cell is not None:  # clicking the same cell again explains it again
            self.cell = cell
            self.cell_changed.emit(cell)
