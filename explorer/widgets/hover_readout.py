"""The line under the heatmaps: the hovered cell's head, row and column tokens and its exact value.

The value is read from the view's :class:`~explorer.widgets.stage_rows.StageRows` (what the read
jobs answered); a cell whose rows have not arrived yet shows "…" and asks for them, and the line
is written again when they come, for the cell hovered *then* (the mouse may have moved on).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QCursor

from explorer.heads import head_name
from explorer.widgets.labels import display_label, rich_safe

MINUS_INFINITY = "−∞ (masked)"
WAITING = "…"  # the value while its rows are read


def format_value(value: float) -> str:
    """The exact float32 value (its shortest round-trip form); −∞ says it was masked."""
    if np.isneginf(value):
        return MINUS_INFINITY
    return str(np.float32(value))


class HoverReadout:
    """Writes ``view.readout`` for the cell under the mouse of a MatrixView."""

    def __init__(self, view) -> None:
        self.view = view
        # (generation, stage name, plot head, row, col) hovered last: names, not the stage, so that
        # an old trace is not kept alive by the last hover over it.
        self.at: tuple[int, str, int, int, int] | None = None
        view.canvas.scene().sigMouseMoved.connect(self.hover)
        view.shown.connect(self.follow)

    def follow(self) -> None:
        """Another stage or run on screen (a step, an edit): the line says what is under the mouse
        now, or the hint; never the last stage's cell (it read the old value until the mouse moved)."""
        stage = self.view.state.stepper.stage
        if self.at is None or stage is None or self.at[:2] == (self.view.state.stepper.generation, stage.name):
            return
        self.at = None
        canvas = self.view.canvas
        inside = canvas.viewport().mapFromGlobal(QCursor.pos())
        if canvas.viewport().rect().contains(inside) and self.view.cell_at(canvas.mapToScene(inside)) is not None:
            self.hover(canvas.mapToScene(inside))
        else:
            self.view.readout.setText(self.view.hint)

    def hover(self, scene_pos) -> None:
        hit, stage = self.view.cell_at(scene_pos), self.view.state.stepper.stage
        if hit is None or stage is None:
            return
        plot, row, col = hit
        self.at = (self.view.state.stepper.generation, stage.name, plot.head, row, col)
        self.show()

    def show(self) -> None:
        """The hovered cell's line, with its value when its rows are here (else asked for)."""
        stage = self.view.state.stepper.stage
        if self.at is None or stage is None or self.at[:2] != (self.view.state.stepper.generation, stage.name):
            return  # another stage or run is on screen now: its line waits for the next move
        _generation, _name, head, row, col = self.at
        values = self.view.values
        weights = stage.name == "weights" and values.trace is not None and "masked" in values.trace
        wants = [(stage.name, head, row, row + 1)] + ([("masked", head, row, row + 1)] if weights else [])
        text = WAITING
        if values.request("hover", wants, self.show):
            text = format_value(values.value(stage.name, head, row, col))
            if weights and np.isneginf(values.value("masked", head, row, col)):
                text += " (masked)"
        where = f"{head_name(stage, head)} · " if stage.per_head else ""
        self.view.readout.setText(
            f"{where}row {row} <b>{rich_safe(display_label(stage.row_labels[row]))}</b> · "
            f"col {col} <b>{rich_safe(display_label(stage.col_labels[col]))}</b> = <b>{text}</b>"
        )
