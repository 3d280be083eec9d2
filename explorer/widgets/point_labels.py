"""Text labels beside the points of a scatter that never overprint and never leave the plot.

The atlas scatter wrote "L1 H1", "L1 H3" and "L1 H0" on top of each other (one blob) and cut "L0 H1"
at the plot's edge. :class:`PointLabels` places them again on every zoom and resize, greedily, the most
important first: each label tries the four corners beside its point (right-above, right-below,
left-above, left-below) and takes the first that lies inside the plot and touches no label placed
before it; a label with no such corner is hidden (its point stays, its name is in the hover and the
table). One group of plain Qt text items (not pg.TextItem: 1,024 of those took seconds to add), each
ignoring the view's scaling, so a label stays readable at any zoom.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtWidgets import QGraphicsItem, QGraphicsSimpleTextItem

GAP_PX = 4.0  # between a point and its label, and between two labels
LABEL_RGB = (60, 60, 60)


def importance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each point's distance from the points' median, in units of each axis's spread: the points far
    from the crowd (the heads that stand out) are labelled first."""
    def scaled(v: np.ndarray) -> np.ndarray:
        spread = float(np.subtract(*np.percentile(v, [90, 10]))) if v.size else 0.0
        return (v - np.median(v)) / (spread or float(np.abs(v).max()) or 1.0)

    return np.hypot(scaled(np.asarray(x, float)), scaled(np.asarray(y, float))) if len(x) else np.zeros(0)


class PointLabels:
    """The labels of ``plot``'s points: :meth:`set_points` gives them, they are placed at once and
    again whenever the view's range or size changes."""

    def __init__(self, plot: pg.PlotWidget) -> None:
        self.plot = plot
        self.box = plot.getPlotItem().getViewBox()
        self.labels: list[QGraphicsSimpleTextItem] = []  # in the points' order
        self.points = np.zeros((0, 2))
        self.order = np.zeros(0, dtype=int)  # most important first
        self.group: pg.ItemGroup | None = None
        self.box.sigRangeChanged.connect(self.place)
        self.box.sigResized.connect(self.place)

    def set_points(self, x: np.ndarray, y: np.ndarray, texts: list[str]) -> None:
        if self.group is not None:
            self.plot.removeItem(self.group)
        self.group = pg.ItemGroup()
        brush, unscaled = pg.mkBrush(*LABEL_RGB), QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations
        self.labels = []
        for text in texts:
            label = QGraphicsSimpleTextItem(text, self.group)
            label.setFlag(unscaled)
            label.setBrush(brush)
            self.labels.append(label)
        self.points = np.column_stack([np.asarray(x, float), np.asarray(y, float)]) if len(texts) else np.zeros((0, 2))
        self.order = np.argsort(-importance(self.points[:, 0], self.points[:, 1]), kind="stable")
        self.plot.addItem(self.group)
        self.place()

    def shown(self) -> list[QGraphicsSimpleTextItem]:
        return [label for label in self.labels if label.isVisible()]

    def scene_rect(self, label: QGraphicsSimpleTextItem) -> QRectF:
        """Where ``label`` is drawn, in the scene's pixels (it ignores the view's scaling: its scene
        bounding rectangle would be scaled)."""
        return QRectF(label.scenePos(), label.boundingRect().size())

    def place(self, *_) -> None:
        if not self.labels:
            return
        room = self.box.sceneBoundingRect()
        if room.width() <= 0 or room.height() <= 0:
            return
        taken: list[QRectF] = []
        for k in self.order.tolist():
            label = self.labels[k]
            size = label.boundingRect().size()
            at = self.box.mapViewToScene(QPointF(*self.points[k]))
            w, h = size.width(), size.height()
            corners = ((GAP_PX, -h - GAP_PX / 2), (GAP_PX, GAP_PX / 2), (-w - GAP_PX, -h - GAP_PX / 2),
                       (-w - GAP_PX, GAP_PX / 2))  # fmt: skip
            for dx, dy in corners:
                rect = QRectF(at.x() + dx, at.y() + dy, w, h)
                if not room.contains(rect):
                    continue
                apart = rect.adjusted(-GAP_PX / 2, -GAP_PX / 2, GAP_PX / 2, GAP_PX / 2)
                if any(apart.intersects(other) for other in taken):
                    continue
                label.setPos(self.box.mapSceneToView(rect.topLeft()))
                label.setVisible(True)
                taken.append(rect)
                break
            else:
                label.setVisible(False)
