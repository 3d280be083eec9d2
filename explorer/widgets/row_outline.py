"""The focused query row's outline, drawn just outside the row's cells, in device pixels.

An outline centred on the row's edges (3 px black, 1 px white) covered a row of a small heatmap
(MiniLM's 12 heads: rows 5-8 px tall) and made the focused row read as a blank band. This one
draws a ring of white pixels touching the row and a ring of black beyond it (two for rows of 8 px
or more): visible on both colour maps, at any zoom, and never over the row's own pixels.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QPainter, QPen
from PySide6.QtWidgets import QGraphicsRectItem

RINGS = 3  # device pixels the outline takes outside the row, at most
BIG_ROW_PX = 8  # a row this tall gets a second black ring


class RowOutline(QGraphicsRectItem):
    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        sx, sy = self._pixel_size()
        return self.rect().adjusted(-RINGS * sx, -RINGS * sy, RINGS * sx, RINGS * sy)

    def _pixel_size(self) -> tuple[float, float]:
        """One device pixel in the item's coordinates (the plot's cells)."""
        scene = self.scene()
        views = scene.views() if scene is not None else []
        if not views:
            return 0.0, 0.0
        inverse, ok = self.deviceTransform(views[0].viewportTransform()).inverted()
        return (abs(inverse.m11()) + abs(inverse.m21()), abs(inverse.m22()) + abs(inverse.m12())) if ok else (0.0, 0.0)

    def paint(self, painter: QPainter, option, widget=None) -> None:  # noqa: ARG002 - Qt API
        device = painter.transform().mapRect(self.rect())
        left, top = round(device.left()), round(device.top())
        width, height = round(device.right()) - left, round(device.bottom()) - top
        painter.save()
        painter.resetTransform()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        rings = [Qt.GlobalColor.white, Qt.GlobalColor.black] + ([Qt.GlobalColor.black] if height >= BIG_ROW_PX else [])
        for out, colour in enumerate(rings, start=1):
            painter.setPen(QPen(colour, 1))  # 1 device pixel: the painter's transform is the identity
            # a 1 px outline of QRect(x, y, w, h) covers the pixels x .. x + w: the ring just outside
            painter.drawRect(QRect(left - out, top - out, width + 2 * out - 1, height + 2 * out - 1))
        painter.restore()
