"""A selected cell in the matrix view, outlined, moved with Ctrl+arrows and explained with Enter.

Plain Left/Right step the stages (window-wide), so the cell moves with Ctrl+arrows while the canvas
has the keyboard focus (a click on a cell gives it). Enter/Return explains the selected cell, the
same as a click (MatrixView.cell_clicked); F2 edits it (as in Qt's item views), the same as a
double-click (MatrixView.cell_double_clicked).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRectF, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QGraphicsRectItem

from explorer.heads import clicked_query_head

MOVES = {Qt.Key.Key_Left: (0, -1), Qt.Key.Key_Right: (0, 1), Qt.Key.Key_Up: (-1, 0), Qt.Key.Key_Down: (1, 0)}
ENTER = (Qt.Key.Key_Return, Qt.Key.Key_Enter)


class CellSelection(QObject):
    def __init__(self, view) -> None:
        super().__init__(view)
        self.view = view
        # The cell chosen, as (head, row, col) of the stage it was chosen on: never clamped to another
        # stage (column 7 of the weights became column 3 on Head outputs, and stayed 3 back on the
        # weights while the inspector said 7); outlined only on its own stage.
        self.chosen: tuple[str, int, int, int] | None = None
        self.outlines: dict[int, QGraphicsRectItem] = {}  # id(HeatmapPlot) → its outline
        view.canvas.installEventFilter(self)
        view.canvas.scene().sigMouseClicked.connect(self._clicked)

    def select(self, plot_index: int, row: int, col: int) -> None:
        stage = self.view.state.stepper.stage
        if stage is not None and 0 <= plot_index < len(self.view.plots):
            self.chosen = (self._where(stage), self.view.plots[plot_index].head, row, col)
        self.sync()

    def _where(self, stage) -> tuple:
        """The stage and the layer (and block) shown: a cell chosen on layer 1 is not layer 0's (a head
        opened from the Why table kept the clicked cell of the other layer outlined)."""
        display = self.view.state.display
        meta = display.trace.meta if display is not None else {}
        return (stage.name, meta.get("layer"), meta.get("block"))

    @property
    def cell(self) -> tuple[int, int, int] | None:
        """(plot index, row, col) of the chosen cell among the plots shown; None when it is not on
        screen (another stage, a head not shown, outside the matrix)."""
        stage = self.view.state.stepper.stage
        if self.chosen is None or stage is None or self.chosen[0] != self._where(stage):
            return None
        _, head, row, col = self.chosen
        for i, plot in enumerate(self.view.plots):
            if plot.head == head and 0 <= row < plot.rows and 0 <= col < plot.cols:
                return i, row, col
        return None

    def sync(self, *_) -> None:
        """Outline the chosen cell where it is shown; hide the other outlines."""
        cell = self.cell
        for i, plot in enumerate(self.view.plots):
            outline = self._outline_for(plot)
            if cell is not None and cell[0] == i:
                rect = QRectF(cell[2], cell[1], 1, 1)
                outline.setRect(rect)
                outline.childItems()[0].setRect(rect)  # the white line on the black one
                outline.show()
            else:
                outline.hide()

    def _outline_for(self, plot) -> QGraphicsRectItem:
        outline = self.outlines.get(id(plot))
        if outline is None:
            outline = QGraphicsRectItem()
            inner = QGraphicsRectItem(outline)
            for item, colour, width in ((outline, Qt.GlobalColor.black, 4), (inner, Qt.GlobalColor.white, 2)):
                pen = QPen(colour, width)
                pen.setCosmetic(True)
                item.setPen(pen)
            outline.setZValue(11)  # above the numbers and the query-row marker
            plot.plot.getViewBox().addItem(outline, ignoreBounds=True)
            self.outlines[id(plot)] = outline
        return outline

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        hit = self.view.cell_at(event.scenePos())
        if hit is not None:
            plot, row, col = hit
            self.select(self.view.plots.index(plot), row, col)
            self.view.canvas.setFocus(Qt.FocusReason.MouseFocusReason)

    def move(self, d_row: int, d_col: int) -> None:
        plots = self.view.plots
        if not plots:
            return
        if self.cell is None:  # nothing chosen on this stage: start at its first cell
            self.select(0, 0, 0)
            return
        p, row, col = self.cell
        plot = plots[p]
        self.select(p, max(0, min(plot.rows - 1, row + d_row)), max(0, min(plot.cols - 1, col + d_col)))

    def explain(self) -> None:
        if self.cell is None or not self.view.plots:
            return
        p, row, col = self.cell
        view = self.view
        head = clicked_query_head(view.state.stepper.stage, view.plots[p].head, view.state.focus_head)
        view.cell_clicked.emit(head, row, col)

    def edit(self) -> None:
        if self.cell is None or not self.view.plots:
            return
        p, row, col = self.cell
        self.view.cell_double_clicked.emit(self.view.plots[p].head, row, col)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt API
        if event.type() != QEvent.Type.KeyPress:
            return False
        key, modifiers = event.key(), event.modifiers()
        if key in MOVES and modifiers & Qt.KeyboardModifier.ControlModifier:
            self.move(*MOVES[Qt.Key(key)])
            return True
        if key in ENTER:
            self.explain()
            return True
        if key == Qt.Key.Key_F2:
            self.edit()
            return True
        return False
