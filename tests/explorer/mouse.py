"""Mouse helpers for the matrix view: the pixel of a cell, a hover through the real scene."""

from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication


def cell_point(view, plot_index, row, col) -> QPoint:
    """The canvas-viewport pixel at the centre of a cell."""
    plot = view.plots[plot_index]
    scene = plot.image.mapToScene(QPointF(col + 0.5, row + 0.5) * 1.0)
    return view.canvas.mapFromScene(scene)


def hover(view, plot_index, row, col, wait=True):
    """A mouse move event through the view and its scene (pyqtgraph's sigMouseMoved); with
    ``wait``, until the value read for it off the GUI thread (the view's read jobs) is shown."""
    QApplication.processEvents()  # let the grid take its final geometry before mapping a cell to pixels
    point = QPointF(cell_point(view, plot_index, row, col))
    move = QMouseEvent(QEvent.Type.MouseMove, point, view.canvas.viewport().mapToGlobal(point),
                       Qt.MouseButton.NoButton, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    QApplication.sendEvent(view.canvas.viewport(), move)
    if wait and view.values.jobs is not None:
        assert view.values.jobs.wait_until_idle()


def double_click(view, plot_index, row, col, wait=True):
    """A left double-click on a cell through the real scene: press, release, double-click, release
    (what a hand's double-click delivers; pyqtgraph reports it as a click with ``double()``); with
    ``wait``, until the cell's value read off the GUI thread has come (the edit dialog opens then)."""
    QApplication.processEvents()
    point = QPointF(cell_point(view, plot_index, row, col))
    viewport = view.canvas.viewport()
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    for kind, buttons in ((QEvent.Type.MouseButtonPress, left), (QEvent.Type.MouseButtonRelease, none),
                          (QEvent.Type.MouseButtonDblClick, left), (QEvent.Type.MouseButtonRelease, none)):  # fmt: skip
        event = QMouseEvent(kind, point, viewport.mapToGlobal(point), left, buttons, Qt.KeyboardModifier.NoModifier)
        QApplication.sendEvent(viewport, event)
    if wait and view.values.jobs is not None:
        assert view.values.jobs.wait_until_idle()
        QApplication.processEvents()
