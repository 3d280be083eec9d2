"""Images for slides and papers: a pyqtgraph scene or a whole window as PNG or SVG (vector, the
token labels as text); always written atomically (a temporary file beside the target, renamed
into place), so a failed save never leaves a half-written file where the old one was."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsView, QWidget

from models.config import InputError
from models.io.atomic import atomic_file

FORMATS = {".png": "PNG", ".svg": "SVG"}
NAME_FILTER = "PNG image (*.png);;SVG vector image (*.svg)"


def image_path(chosen: str | Path, formats=FORMATS) -> Path:
    """``chosen`` with a known extension kept (any case), else with ``.png`` added."""
    path = Path(chosen)
    return path if path.suffix.lower() in formats else path.with_name(path.name + ".png")


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if image.isNull() or not image.save(buffer, "PNG"):
        raise InputError("cannot make the image: it is empty")
    buffer.close()
    return bytes(data.data())


@contextmanager
def drawn_as_vectors(root: QGraphicsScene | QWidget) -> Iterator[None]:
    """While an SVG is made: the items kept as pixmaps on screen (the token axes,
    explorer/widgets/token_axis.py) are drawn as themselves, so that their labels are text in the
    file rather than a picture of text; as they were afterwards."""
    if isinstance(root, QGraphicsScene):
        scenes = [root]
    else:
        views = ([root] if isinstance(root, QGraphicsView) else []) + root.findChildren(QGraphicsView)
        scenes = [view.scene() for view in views if view.scene() is not None]
    none = QGraphicsItem.CacheMode.NoCache
    cached = [(item, item.cacheMode()) for scene in scenes for item in scene.items() if item.cacheMode() != none]
    for item, _ in cached:
        item.setCacheMode(none)
    try:
        yield
    finally:
        for item, mode in cached:
            item.setCacheMode(mode)


def scene_bytes(scene, fmt: str) -> bytes:
    """The whole scene of a pyqtgraph GraphicsView as PNG or SVG bytes (pyqtgraph.exporters)."""
    from pyqtgraph import exporters

    if fmt == "SVG":
        with drawn_as_vectors(scene):
            try:
                return exporters.SVGExporter(scene).export(toBytes=True)
            except ValueError:  # pyqtgraph 0.14 cannot parse the closed paths ("… Z") of Qt 6.x (its #3495)
                return qt_svg_bytes(scene)
    return png_bytes(exporters.ImageExporter(scene).export(toBytes=True))


def qt_svg_bytes(scene) -> bytes:
    """The scene as Qt's own SVG generator draws its view: text stays text, images are embedded."""
    view = scene.views()[0]
    return _svg_bytes(view, view.viewport().size(), view.render)  # QGraphicsView.render: the scene


def widget_svg_bytes(widget: QWidget) -> bytes:
    """``widget`` and all its children (a whole window) as Qt's SVG generator draws them: labels and
    axis ticks stay text, the heatmaps are embedded images."""
    from PySide6.QtCore import QPoint

    with drawn_as_vectors(widget):
        return _svg_bytes(widget, widget.size(), lambda painter: QWidget.render(widget, painter, QPoint(0, 0)))


def _svg_bytes(view: QWidget, size, draw) -> bytes:
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QPainter
    from PySide6.QtSvg import QSvgGenerator

    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(size)
    generator.setViewBox(QRect(0, 0, size.width(), size.height()))
    generator.setResolution(view.logicalDpiX())  # else text is laid out at 72 dpi, out of place
    generator.setTitle("Attention Explorer")
    painter = QPainter(generator)
    try:
        draw(painter)
    finally:
        painter.end()
    buffer.close()
    return bytes(data.data())


def write_bytes(data: bytes, path: Path) -> Path:
    """The one way an image reaches the disk: a temporary sibling, synced, renamed (models.io.atomic)."""
    with atomic_file(path, "image to") as f:
        f.write(data)
    return path


def write_png(widget: QWidget, path: str | Path) -> str | None:
    """``widget`` as PNG at exactly ``path`` (whatever its extension), atomically; the one-line
    reason when it cannot be written (a full disk, a file-size limit), else None."""
    try:
        write_bytes(png_bytes(widget.grab().toImage()), Path(path))
    except InputError as exc:
        return str(exc)
    return None


def save_screenshot(widget: QWidget, path: str | Path) -> int:
    """The one way every ``--screenshot`` (each ``--view``, the timeline, Generate, atlas and
    attention windows) reaches the disk: rendered into memory, written atomically
    (:func:`write_png`); ``wrote PATH`` on stdout and 0, or one ``error: …`` line on stderr and 2."""
    import sys

    problem = write_png(widget, path)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def save_scene(scene, chosen: str | Path) -> Path:
    """Write ``scene`` to ``chosen``: SVG for ``.svg``, else PNG (``.png`` added when missing)."""
    path = image_path(chosen)
    return write_bytes(scene_bytes(scene, FORMATS[path.suffix.lower()]), path)


def save_widget_png(widget: QWidget, chosen: str | Path) -> Path:
    """``widget`` as it is on screen, as PNG (``.png`` added unless given)."""
    path = image_path(chosen, {".png": "PNG"})
    return write_bytes(png_bytes(widget.grab().toImage()), path)


def save_widget(widget: QWidget, chosen: str | Path) -> Path:
    """``widget`` (the whole window) as it is on screen: SVG for ``.svg`` (its labels as text),
    else PNG (``.png`` added when missing)."""
    path = image_path(chosen)
    if FORMATS[path.suffix.lower()] == "SVG":
        return write_bytes(widget_svg_bytes(widget), path)
    return write_bytes(png_bytes(widget.grab().toImage()), path)
