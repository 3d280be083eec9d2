"""The pixel harness: what a view really painted, read back from an offscreen grab.

``grab(view)`` renders a pyqtgraph canvas's viewport into an image; ``cell_box`` gives the device
pixels a matrix cell covers; ``colour_near`` and ``square_of`` read the colours there. Tests compare
them with the colour map's own entries (explorer.widgets.colormaps.lookup_table), so a view that
paints the wrong index, drops a peak or scales an image twice fails.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF


def grab(canvas) -> np.ndarray:
    """(H, W, 3) uint8 RGB of what ``canvas`` (a pyqtgraph GraphicsView) shows."""
    from PySide6.QtGui import QImage

    canvas.viewport().repaint()
    image = canvas.viewport().grab().toImage().convertToFormat(QImage.Format.Format_RGB888)
    w, h = image.width(), image.height()
    data = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.bytesPerLine() * h)
    return data.reshape(h, image.bytesPerLine())[:, : w * 3].reshape(h, w, 3).copy()


def device_rect(canvas, view_box, rect: QRectF) -> tuple[int, int, int, int]:
    """Device pixels (x0, y0, x1, y1) of ``rect`` given in ``view_box`` data coordinates."""
    top_left = canvas.mapFromScene(view_box.mapViewToScene(rect.topLeft()))
    bottom_right = canvas.mapFromScene(view_box.mapViewToScene(rect.bottomRight()))
    ratio = canvas.devicePixelRatioF()
    xs = sorted((top_left.x() * ratio, bottom_right.x() * ratio))
    ys = sorted((top_left.y() * ratio, bottom_right.y() * ratio))
    return int(xs[0]), int(ys[0]), int(np.ceil(xs[1])), int(np.ceil(ys[1]))


def cell_centre(canvas, view_box, row: float, col: float) -> tuple[int, int]:
    """Device pixel (x, y) at the centre of cell (row, col)."""
    p = canvas.mapFromScene(view_box.mapViewToScene(QPointF(col + 0.5, row + 0.5)))
    ratio = canvas.devicePixelRatioF()
    return int(p.x() * ratio), int(p.y() * ratio)


def near(colour, target, tolerance: int = 12) -> bool:
    return bool(np.all(np.abs(np.asarray(colour, int) - np.asarray(target, int)) <= tolerance))


def square_of(pixels: np.ndarray, x: int, y: int, target, size: int = 3, tolerance: int = 12) -> bool:
    """True when some ``size × size`` square of pixels around (x, y) (within 3 px) is all ``target``."""
    for y0 in range(y - 3, y + 1):
        for x0 in range(x - 3, x + 1):
            block = pixels[max(0, y0) : y0 + size, max(0, x0) : x0 + size].reshape(-1, 3).astype(int)
            if block.shape[0] == size * size and np.all(np.abs(block - np.asarray(target, int)) <= tolerance):
                return True
    return False


def count_colour(pixels: np.ndarray, target, box: tuple[int, int, int, int] | None = None, tolerance: int = 12) -> int:
    x0, y0, x1, y1 = box if box is not None else (0, 0, pixels.shape[1], pixels.shape[0])
    part = pixels[y0:y1, x0:x1].reshape(-1, 3).astype(int)
    return int(np.all(np.abs(part - np.asarray(target, int)) <= tolerance, axis=1).sum())


def overlapping(rects: list[QRectF]) -> list[tuple[int, int]]:
    """Pairs of indices of rectangles that overlap (by more than a hair)."""
    pairs = []
    for i, a in enumerate(rects):
        for j in range(i + 1, len(rects)):
            inter = a.intersected(rects[j])
            if inter.width() > 0.5 and inter.height() > 0.5:
                pairs.append((i, j))
    return pairs


def mosaic_tiles(model_view) -> np.ndarray:
    """``(layers, heads, t_q, t_k)``: the colour indices of every thumbnail the model view's mosaic
    holds (cut out of its one image at its tile size and gaps)."""
    from explorer.images.thumbnails import GAP

    t_q, t_k = model_view.tile
    image = np.asarray(model_view.mosaic.image)
    return np.stack([
        np.stack([image[l * (t_q + GAP) : l * (t_q + GAP) + t_q, h * (t_k + GAP) : h * (t_k + GAP) + t_k]
                  for h in range(model_view.heads)])
        for l in range(model_view.layers)  # noqa: E741
    ])  # fmt: skip
