"""What a session holds of the window's state (explorer/state.py), as immutable plain data, Qt-free:
the what-if edits with their undo and redo steps (each operation returns a new history), and the
:class:`Snapshot` that :meth:`ExplorerState.snapshot` returns and :meth:`ExplorerState.apply` sets.

One step is what one Undo takes back: a single edited cell, or every cell of a key hidden from
every query at once (explorer/actions/hide_keys.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from explorer.heads import ALL_HEADS
from explorer.inputs import Inputs
from explorer.run import DisplayTrace
from models.engine.trace import STAGE_ORDER

if TYPE_CHECKING:  # models.engine.edits imports torch: the state stays free of it
    from models.engine.edits import Edit

NO_QUERY = -1


@dataclass(frozen=True)
class EditHistory:
    steps: tuple[tuple[Edit, ...], ...] = ()  # applied, oldest first: Undo takes back the last
    undone: tuple[tuple[Edit, ...], ...] = ()  # taken back, the last undone last: Redo applies it again

    @classmethod
    def of(cls, edits) -> EditHistory:
        """``edits`` as one step each, nothing undone (a session's edits)."""
        return cls(tuple((edit,) for edit in edits))

    def check(self) -> None:
        """TypeError unless every step is a non-empty tuple of edits (a stage name, a cell, a number)."""
        for step in (*self.steps, *self.undone):
            if not isinstance(step, tuple) or not step or not all(_is_edit(e) for e in step):
                raise TypeError(f"an edit step must be a non-empty tuple of edits, not {step!r}")

    @property
    def edits(self) -> tuple[Edit, ...]:
        return tuple(edit for step in self.steps for edit in step)

    @property
    def can_undo(self) -> bool:
        return bool(self.steps)

    @property
    def can_redo(self) -> bool:
        return bool(self.undone)

    def add(self, edits) -> EditHistory:
        """``edits`` as one new step; what was undone can no longer be redone."""
        step = tuple(edits)
        return EditHistory(self.steps + (step,)) if step else self

    def undo(self) -> EditHistory:
        return EditHistory(self.steps[:-1], self.undone + self.steps[-1:]) if self.steps else self

    def redo(self) -> EditHistory:
        return EditHistory(self.steps + self.undone[-1:], self.undone[:-1]) if self.undone else self


@dataclass(frozen=True)
class Snapshot:
    """What a session file holds, as the state holds it: plain data, no Qt. The RunSpec of the run is
    ``inputs.to_runspec().with_edits(edits, difference)``; ``pinned`` is the pinned run itself (its
    DisplayTrace carries the RunSpec that made it: a session file stores that)."""

    inputs: Inputs
    history: EditHistory = EditHistory()
    difference: bool = False
    stage: str | None = None  # None: the stage shown stays
    head: int = ALL_HEADS
    query: int = NO_QUERY
    pinned: DisplayTrace | None = None
    focus_head: int | None = None  # None: the head when one is given, else the focused head stays

    @property
    def edits(self) -> tuple:
        return self.history.edits

    def replace(self, **changes) -> Snapshot:
        return dataclasses.replace(self, **changes)

    def check(self) -> None:
        """TypeError / ValueError when a field is not what the state can hold (nothing is set then)."""
        if not isinstance(self.inputs, Inputs):
            raise TypeError(f"inputs must be Inputs, not {type(self.inputs).__name__}")
        if not isinstance(self.history, EditHistory):
            raise TypeError(f"history must be an EditHistory, not {type(self.history).__name__}")
        self.history.check()
        if type(self.difference) is not bool:
            raise TypeError(f"difference must be true or false, not {self.difference!r}")
        if self.stage is not None and self.stage not in STAGE_ORDER:
            raise ValueError(f"unknown stage {self.stage!r}")
        for name in ("head", "query", "focus_head"):
            value = getattr(self, name)
            if value is None and name == "focus_head":
                continue
            if type(value) is not int or value < (0 if name == "focus_head" else -1):
                raise ValueError(f"{name} must be a whole number from {0 if name == 'focus_head' else -1}, "
                                 f"not {value!r}")  # fmt: skip
        if self.pinned is not None and not isinstance(self.pinned, DisplayTrace):
            raise TypeError(f"pinned must be a DisplayTrace, not {type(self.pinned).__name__}")


def _is_edit(edit) -> bool:
    """Shaped as a models.engine.edits.Edit (checked by its fields: importing it would bring torch in)."""
    cell = getattr(edit, "cell", None)
    return isinstance(getattr(edit, "stage", None), str) and isinstance(cell, tuple) and \
        all(type(c) is int for c in cell) and type(getattr(edit, "value", None)) in (int, float)  # fmt: skip
