"""File → Save image…: the matrix view or the whole window as PNG or SVG (token labels as text), atomically."""

import numpy as np
import pytest
from PySide6.QtGui import QImage


@pytest.fixture
def window(make_window):
    return make_window()


def _answer(monkeypatch, window, path):
    monkeypatch.setattr(window.exports, "ask_save_path", lambda *_a: str(path))


def _files(folder):
    return sorted(p.name for p in folder.iterdir() if p.name != "settings.ini")


def test_svg_holds_the_tokens_as_text(monkeypatch, window, tmp_path):
    window.state.set_stage("weights")
    _answer(monkeypatch, window, tmp_path / "weights.SVG")
    path = window.exports.save_image()
    assert path == tmp_path / "weights.SVG"
    text = path.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert ">cat<" in text.replace(" ", "") or "cat</text>" in text  # a token label, as text
    assert _files(tmp_path) == ["weights.SVG"]
    assert not window.status_line.is_error and str(path) in window.status_line.text()


def test_png_of_the_canvas_by_default(monkeypatch, window, tmp_path):
    _answer(monkeypatch, window, tmp_path / "view")
    path = window.exports.save_image()
    assert path == tmp_path / "view.png"
    image = QImage(str(path))
    canvas = window.matrix_view.canvas
    assert not image.isNull() and image.width() >= canvas.width() - 2
    pixels = np.frombuffer(image.convertToFormat(QImage.Format.Format_RGB888).constBits(), np.uint8)
    assert len(np.unique(pixels)) > 10  # the heatmaps, not a blank page


def test_window_image_is_a_png_of_the_whole_window(monkeypatch, window, tmp_path):
    _answer(monkeypatch, window, tmp_path / "window")
    path = window.exports.save_window_image()
    assert path == tmp_path / "window.png"
    assert QImage(str(path)).width() == window.grab().width()


def test_window_image_as_svg_holds_every_panel_with_its_text(monkeypatch, window, tmp_path):
    import xml.etree.ElementTree as ET

    window.state.set_stage("weights")
    _answer(monkeypatch, window, tmp_path / "window.svg")
    path = window.exports.save_window_image()
    assert path == tmp_path / "window.svg" and _files(tmp_path) == ["window.svg"]
    root = ET.fromstring(path.read_text(encoding="utf-8"))
    assert root.tag.endswith("svg")
    texts = {"".join(e.itertext()).strip() for e in root.iter() if e.tag.endswith("text")}
    assert {"The", "cat", "mat"} <= texts  # the token labels, as text
    assert "Softmax weights" in texts and "Focus on one query" in texts  # the stepper and the side panel
    assert sum(1 for e in root.iter() if e.tag.endswith("image")) >= 2  # the heatmaps, embedded
    assert not window.status_line.is_error


def test_an_unwritable_folder_leaves_nothing_behind(monkeypatch, window, tmp_path):
    import tempfile

    def refuse(*args, **kwargs):  # permissions do not stop root: the refusal is simulated
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    for name in ("m.svg", "m.png"):
        _answer(monkeypatch, window, tmp_path / name)
        assert window.exports.save_image() is None
        assert window.status_line.is_error and "Permission denied" in window.status_line.text()
        assert "\n" not in window.status_line.text()
    assert _files(tmp_path) == []


def test_a_failed_write_keeps_the_old_file(monkeypatch, window, tmp_path):
    import os

    old = tmp_path / "m.svg"
    old.write_text("old")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    _answer(monkeypatch, window, old)
    assert window.exports.save_image() is None
    assert old.read_text() == "old" and _files(tmp_path) == ["m.svg"]
    assert "No space left" in window.status_line.text()
