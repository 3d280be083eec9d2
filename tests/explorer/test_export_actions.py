"""Export matrix / export all / save image, with the file dialogs replaced."""


import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from models.files.export import read_trace_files


@pytest.fixture
def window(make_window):
    return make_window()


def _written(window, path):
    """``path`` once the export has been written (read jobs write it off the GUI thread)."""
    assert window.jobs.wait_until_idle()
    return path


def _answer_dialogs(monkeypatch, window, path):
    """Every file dialog answers ``path``; returns the list of suggestions the dialogs were given."""
    asked = []

    def answer(caption, suggested, *rest):
        asked.append(suggested)
        return str(path) if path is not None else None

    monkeypatch.setattr(window.exports, "ask_save_path", answer)
    monkeypatch.setattr(window.exports, "ask_folder", answer)
    return asked


def test_export_matrix_writes_the_shown_stage(monkeypatch, window, tmp_path, qtbot):
    window.state.set_stage("scores")
    _answer_dialogs(monkeypatch, window, tmp_path / "scores.npy")
    path = _written(window, window.exports.export_matrix())
    np.testing.assert_array_equal(np.load(path), window.state.display.trace["scores"].array)
    assert not window.status_line.is_error and str(path) in window.status_line.text()


def test_export_matrix_of_one_head(monkeypatch, window, tmp_path):
    window.state.set_stage("weights")
    window.state.set_head(1)
    asked = _answer_dialogs(monkeypatch, window, tmp_path / "w")
    path = _written(window, window.exports.export_matrix())
    assert asked[0].name == "weights_head1.npy"  # head 1, 0-based
    assert path.suffix == ".npy"
    np.testing.assert_array_equal(np.load(path), window.state.display.trace["weights"].head(1))


def test_export_all_matches_the_headless_layout(monkeypatch, window, tmp_path):
    out = tmp_path / "trace"
    out.mkdir()
    _answer_dialogs(monkeypatch, window, out)
    assert _written(window, window.exports.export_all()) == out
    manifest, arrays = read_trace_files(out)
    trace = window.state.display.trace
    assert [s["name"] for s in manifest["stages"]] == list(trace.names)
    for name in trace.names:
        np.testing.assert_array_equal(arrays[name], trace[name].array)


def test_export_all_into_a_full_folder_makes_a_subfolder(monkeypatch, window, tmp_path):
    (tmp_path / "someone_else.txt").write_text("keep me")
    _answer_dialogs(monkeypatch, window, tmp_path)
    out = _written(window, window.exports.export_all())
    assert out == tmp_path / "attention-trace"
    assert (tmp_path / "someone_else.txt").read_text() == "keep me"
    assert (out / "manifest.json").is_file()


def test_save_image_writes_a_png(monkeypatch, window, tmp_path):
    _answer_dialogs(monkeypatch, window, tmp_path / "view")
    path = window.exports.save_image()
    assert path == tmp_path / "view.png"
    image = QImage(str(path))
    assert not image.isNull() and image.width() > 100


def test_the_folder_is_remembered(monkeypatch, window, tmp_path):
    _answer_dialogs(monkeypatch, window, tmp_path / "a.npy")
    _written(window, window.exports.export_matrix())
    asked = _answer_dialogs(monkeypatch, window, None)  # cancelled dialog: nothing happens
    assert window.exports.export_matrix() is None
    assert asked[0].parent == tmp_path


def test_unwritable_folder_is_a_status_message(monkeypatch, window, tmp_path):
    # Permissions do not stop root, so the refusal the OS would give is simulated where it happens.
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    _answer_dialogs(monkeypatch, window, tmp_path / "x.npy")
    window.exports.export_matrix()
    _written(window, None)
    assert window.status_line.is_error and "cannot write" in window.status_line.text()
    assert "Permission denied" in window.status_line.text()
    _answer_dialogs(monkeypatch, window, tmp_path)
    window.exports.export_all()
    _written(window, None)
    assert window.status_line.is_error and "Permission denied" in window.status_line.text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "settings.ini") == []


def test_missing_folder_is_a_status_message(monkeypatch, window, tmp_path):
    _answer_dialogs(monkeypatch, window, tmp_path / "no" / "such" / "x.npy")
    window.exports.export_matrix()
    _written(window, None)
    assert window.status_line.is_error and "cannot write" in window.status_line.text()
    assert not (tmp_path / "no").exists()
    _answer_dialogs(monkeypatch, window, tmp_path / "nope" / "deeper")
    window.exports.export_all()
    _written(window, None)
    assert window.status_line.is_error
    (tmp_path / "a_file").write_text("")
    _answer_dialogs(monkeypatch, window, tmp_path / "a_file" / "x.npy")  # a file where a folder should be
    assert window.exports.save_image() is None or not (tmp_path / "a_file" / "x.png").exists()
    window.exports.export_matrix()
    _written(window, None)
    assert window.status_line.is_error


def test_menu_actions_and_shortcuts_reach_the_exports(qtbot, monkeypatch, window):
    called = []
    for name in ("export_matrix", "export_all", "save_image"):
        monkeypatch.setattr(window.exports, name, lambda name=name: called.append(name))
    names = ("export_matrix", "export_all", "save_image", "save_window_image")
    keys = {name: {s.toString() for s in window.menus.qaction(f"file.{name}").shortcuts()} for name in names}
    assert keys == {"export_matrix": {"Ctrl+E"}, "export_all": {"Ctrl+Shift+E"},
                    "save_image": {"Ctrl+Shift+S", "Ctrl+P"}, "save_window_image": set()}  # fmt: skip
    window.activateWindow()
    window.matrix_view.canvas.setFocus()
    qtbot.keyClick(window.matrix_view.canvas, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    window.registry.execute("file.export_all")
    window.menus.qaction("file.save_image").trigger()  # the menu entry runs the same action
    assert called == ["export_matrix", "export_all", "save_image"]


def test_an_export_reads_and_writes_off_the_gui_thread(monkeypatch, window, tmp_path, no_stage_reads_on_gui_thread):
    window.state.set_stage("weights")
    _answer_dialogs(monkeypatch, window, tmp_path / "w.npy")
    reads = no_stage_reads_on_gui_thread()
    path = window.exports.export_matrix()
    assert path == tmp_path / "w.npy" and "Writing" in window.status_line.text()
    _written(window, path)
    assert "Saved" in window.status_line.text() and not window.status_line.is_error
    out = tmp_path / "all"
    out.mkdir()
    _answer_dialogs(monkeypatch, window, out)
    _written(window, window.exports.export_all())
    no_stage_reads_on_gui_thread.disarm()
    assert reads and [what for what, on_gui in reads if on_gui] == []
    np.testing.assert_array_equal(np.load(path), window.state.display.trace["weights"].array)
    assert (out / "manifest.json").is_file()
