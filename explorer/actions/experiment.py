"""What-if edits in the window: double-click a cell of an input-side stage, enter a number, and
every later stage recomputes on the worker (explorer.engine.edited_runner); Edit menu: Undo, Redo,
Reset edits; edited cells outlined; a "Difference" view of edited − original. For the toy engine
and for a model's layer alike (its input, q, k, v, their norms and rotations, the scores, the mask:
models/pretrained/edits.py)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QRectF, QSignalBlocker, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QCheckBox, QGraphicsRectItem, QInputDialog, QLabel, QSizePolicy

from explorer.engine.edited_runner import largest_change
from explorer.widgets.labels import rich_safe
from models.engine.edits import Edit
from models.engine.stages import PAIR_STAGES

# double-click edits these (the normed and rotated q and k: a model's layer)
CELL_STAGES = ("embeddings", "input", "query_input", "q", "k", "v", "q_normed", "k_normed", "q_rotated", "k_rotated",
               "scores")  # fmt: skip
MARK_COLOUR = "#ff8c00"


class Experiment(QObject):
    """The edits of the shown computation on screen: the Difference checkbox (a mirror of
    ``state.difference``), the edited cells outlined, the largest change named. The edits, their undo
    and redo steps and the toggle live in the state (explorer/state.py): this is handed the state, the
    matrix view (its pane) and ``error(text)`` (the status line's); the Edit menu's actions
    (explorer.actions) call its public methods, which change the state (the window sends the request)."""

    def __init__(self, state, view, error: Callable[[str], None], parent=None):
        super().__init__(parent)
        self.state, self.view = state, view
        self._error = error
        self._marks: list[tuple[int, object, QGraphicsRectItem]] = []  # (head, plot item, outline)
        self.difference = QCheckBox("Difference")
        self.difference.setToolTip("Edited − original of this stage, on a diverging map centred on 0")
        self.difference.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.difference.setChecked(state.difference)
        self.difference.toggled.connect(state.set_difference)
        state.difference_changed.connect(self._mirror_difference)
        self.largest = QLabel()
        self.largest.setObjectName("largestChange")
        self.largest.setMinimumWidth(1)  # its text must not widen the view (see rangeLabel): nor its size hint
        self.largest.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.view.add_control(self.difference)
        self.view.add_control(self.largest)
        self.view.cell_double_clicked.connect(self.edit_cell)
        self.view.shown.connect(self._refresh)  # marks on what the view shows, once it shows it

    def _mirror_difference(self, on: bool) -> None:
        with QSignalBlocker(self.difference):
            self.difference.setChecked(on)

    @property
    def edits(self) -> list[Edit]:
        """The edits applied, oldest first (the state's)."""
        return list(self.state.edits)

    # --- editing ---------------------------------------------------------------------------
    def ask_value(self, stage_title: str, cell: tuple[int, ...], current: float) -> float | None:
        """The number dialog (tests replace this method)."""
        value, ok = QInputDialog.getDouble(self.view.window(), "Edit a value", f"{stage_title} {list(cell)}:",
                                           current, -1e30, 1e30, 6)  # fmt: skip
        return value if ok else None

    def edit_cell(self, head: int, row: int, col: int) -> bool:
        """Double-click on a cell of the shown stage: ask for a number and recompute. The dialog
        opens with the cell's value, from the view's rows (read off the GUI thread: the cell was
        hovered, or its stage is small and read whole); when they are not there yet, once they
        come (then only if the same stage of the same run is still shown). False when refused."""
        stage, display = self.state.stepper.stage, self.state.display
        if stage is None or display is None:
            return False
        if stage.name not in CELL_STAGES:
            return False
        if stage.col_axis == "key" and col >= len(display.trace.key_tokens):  # gpt-oss's sink column
            self._error("the sink is a learned logit, not a score: it cannot be edited")
            return False
        shown = (self.state.stepper.generation, stage.name)

        def ask() -> None:
            if (self.state.stepper.generation, getattr(self.state.stepper.stage, "name", None)) == shown:
                self._ask_and_edit(stage, head, row, col, bool(display.trace.meta.get("difference")))

        if display.trace.meta.get("difference") or self.view.values.request("edit", [(stage.name, head, row, row + 1)],
                                                                             ask):  # fmt: skip
            ask()
        return True

    def _ask_and_edit(self, stage, head: int, row: int, col: int, difference: bool) -> None:
        cell = (head, row, col) if stage.per_head else (row, col)
        earlier = [e.value for e in self.edits if e.stage == stage.name and e.cell == cell]
        shown = 0.0 if difference else self.view.values.value(stage.name, head, row, col)
        current = earlier[-1] if earlier else shown
        value = self.ask_value(stage.title, cell, float(current))
        if value is not None:
            self.add_edit(Edit(stage.name, cell, float(value)))

    def add_edit(self, edit: Edit) -> None:
        self.state.add_edits([edit])

    def add_edits(self, edits) -> None:
        """Several edits as one undo step (hiding a token from every query)."""
        self.state.add_edits(edits)

    def undo(self) -> None:
        self.state.undo()

    def redo(self) -> None:
        self.state.redo()

    def reset(self) -> None:
        self.state.reset_edits()

    @property
    def marks(self) -> list[tuple[int, int, int]]:
        """The outlined cells on screen, as (head, row, col) of the plots they are drawn on."""
        return [(head, int(rect.rect().top()), int(rect.rect().left())) for head, _plot, rect in self._marks]

    # --- on screen -------------------------------------------------------------------------
    def _refresh(self, *_args) -> None:
        self._draw_marks()
        self._name_largest()

    def _draw_marks(self) -> None:
        for _head, plot_item, rect in self._marks:
            plot_item.removeItem(rect)
        self._marks = []
        stage = self.state.stepper.stage
        if stage is None:
            return
        pen = QPen(Qt.GlobalColor.black)
        pen.setColor(MARK_COLOUR)
        pen.setWidth(3)
        pen.setCosmetic(True)
        for edit in {(e.stage, e.cell): e for e in self.edits}.values():  # a cell edited twice: one mark
            # A hidden or shown key is an edit of every query × key stage (it shows in all of them).
            mask_cell = edit.stage == "mask" and stage.name in PAIR_STAGES
            if edit.stage != stage.name and not mask_cell:
                continue
            if mask_cell:
                head, (row, col) = None, edit.cell
            else:
                head, row, col = edit.cell if stage.per_head else (0, *edit.cell)
            for plot in self.view.plots:
                if stage.per_head and head is not None and plot.head != head:
                    continue
                rect = QGraphicsRectItem(QRectF(col, row, 1, 1))
                rect.setPen(pen)
                rect.setZValue(20)
                plot.plot.addItem(rect)
                self._marks.append((plot.head, plot.plot, rect))

    def _name_largest(self) -> None:
        display, stage = self.state.display, self.state.stepper.stage
        if display is None or stage is None or not display.trace.meta.get("difference"):
            self.largest.setText("")
            return
        found = largest_change(stage, [p.head for p in self.view.plots])
        if found is None or found[3] == 0.0:
            self.largest.setText("no change here")
            return
        head, row, col, value = found
        where = f"head {head} · " if stage.per_head else ""
        self.largest.setText(f"largest Δ: {where}<b>{rich_safe(stage.row_labels[row])}</b> × "
                             f"<b>{rich_safe(stage.col_labels[col])}</b> = <b>{value:+.4g}</b>")  # fmt: skip
        self.largest.setToolTip(self.largest.text())  # the whole text when the row is too narrow

