"""Export matrix (.npy), export all (folder + manifest.json, as `main.py export`), save image (PNG or SVG
of the matrix view or of the whole window).

The file dialogs sit behind :meth:`ExportActions.ask_save_path` and :meth:`ExportActions.ask_folder`
so that tests can replace them. Every failure is one line in the status bar, never a traceback.
Arrays are read and written off the GUI thread by the window's read jobs (explorer.jobs: reading a
lazy stage computes it); the status line says when the file is written, or why not. Images are
grabbed from the widgets, on the GUI thread.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QSettings
from PySide6.QtWidgets import QFileDialog, QWidget

from explorer.files.image_export import NAME_FILTER, save_scene, save_widget, save_widget_png
from explorer.files.persistence import export_folder, remember_export_folder
from explorer.heads import array_head, is_kv_stage
from explorer.state import ALL_HEADS, ExplorerState
from models.config import InputError
from models.files.export import npy_path, write_array, write_trace

Report = Callable[[str], None]


class ExportActions(QObject):
    def __init__(self, parent: QWidget, state: ExplorerState, image_source: QWidget, settings: QSettings,
                 info: Report, error: Report, jobs=None):  # fmt: skip
        """``jobs``: the window's read jobs, which read and write the arrays off the GUI thread; None
        writes them in the caller's turn."""
        super().__init__(parent)
        self.jobs = jobs
        self._exports = itertools.count()  # each export is a job kind of its own: none replaces another
        self.parent_widget = parent
        self.state = state
        self.image_source = image_source  # the widget "Save image" grabs
        self.settings = settings
        self.info, self.error = info, error

    # --- dialogs (tests monkeypatch these two) ---------------------------------------------
    def ask_save_path(self, caption: str, suggested: Path, name_filter: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self.parent_widget, caption, str(suggested), name_filter)
        return path or None

    def ask_folder(self, caption: str, start: Path) -> str | None:
        return QFileDialog.getExistingDirectory(self.parent_widget, caption, str(start)) or None

    # --- actions ---------------------------------------------------------------------------
    def export_matrix(self) -> Path | None:
        """The shown stage's array: every head, or only the one on screen when one is picked.
        Returns the file written (with read jobs: being written), None when refused or cancelled."""
        if (display := self._display_or_complain()) is None:
            return None
        stage = display.trace[self.state.stage_name]
        one_head = stage.per_head and self.state.head != ALL_HEADS
        head = array_head(stage, self.state.head) if one_head else 0  # a GQA key/value head for k, v
        shape = stage.shape[-2:] if one_head else stage.shape
        kind = "kvhead" if is_kv_stage(stage) else "head"
        name = f"{stage.name}_{kind}{head}.npy" if one_head else f"{stage.name}.npy"
        chosen = self.ask_save_path("Export matrix", export_folder(self.settings) / name, "NumPy array (*.npy)")
        if not chosen:
            return None

        def write() -> Path:  # reads the stage: off the GUI thread
            return write_array(stage.head(head) if one_head else stage.array, chosen)

        return self._write(write, f"{stage.title} {'×'.join(map(str, shape))}", off_gui=True,
                           target=npy_path(chosen))  # fmt: skip

    def export_all(self) -> Path | None:
        """Every stage + manifest.json into the chosen folder if it is empty, else into a new
        subfolder of it (never over someone's files)."""
        if (display := self._display_or_complain()) is None:
            return None
        chosen = self.ask_folder("Export all stages into folder", export_folder(self.settings))
        if not chosen:
            return None
        trace = display.trace
        try:
            target = _target_in(Path(chosen))
        except (InputError, OSError) as exc:
            self.error(str(exc) if isinstance(exc, InputError) else f"cannot write: {exc.strerror or exc}")
            return None
        return self._write(lambda: write_trace(trace, target), f"{len(trace.stages)} stages + manifest.json",
                           off_gui=True, target=target)  # fmt: skip

    def save_image(self) -> Path | None:
        """The matrix view's canvas as PNG or SVG (by the extension; PNG when there is none)."""
        if self.state.display is None:
            self.error("nothing to save yet")
            return None
        suggested = export_folder(self.settings) / f"{self.state.stage_name}.png"
        chosen = self.ask_save_path("Save image of the matrix view", suggested, NAME_FILTER)
        if not chosen:
            return None
        canvas = getattr(self.image_source, "canvas", None)  # the matrix view's pyqtgraph canvas
        if canvas is None:
            return self._write(lambda: save_widget_png(self.image_source, chosen), "image of the view")
        return self._write(lambda: save_scene(canvas.scene(), chosen), "image of the matrix view")

    def save_window_image(self) -> Path | None:
        """The whole window as PNG or SVG (by the extension; PNG when there is none)."""
        suggested = export_folder(self.settings) / "attention-explorer.png"
        chosen = self.ask_save_path("Save image of the window", suggested, NAME_FILTER)
        if not chosen:
            return None
        getattr(self.image_source, "flush", lambda: None)()  # the heatmaps painted, not a held canvas
        return self._write(lambda: save_widget(self.parent_widget, chosen), "image of the window")

    # --- helpers ---------------------------------------------------------------------------
    def _display_or_complain(self):
        if self.state.display is None:
            self.error("nothing to export yet: the first computation has not finished")
        return self.state.display

    def _write(self, write: Callable[[], Path], what: str, off_gui: bool = False,
               target: Path | None = None) -> Path | None:  # fmt: skip
        """Run ``write`` (on the read jobs' thread when ``off_gui`` and there are jobs: then returns
        ``target``, and the status line says when it is written) and report it as one line."""
        if off_gui and self.jobs is not None:
            self.info(f"Writing {what} to {target}…")
            self.jobs.ask(f"export-{next(self._exports)}", lambda: _written(write), lambda r: self._report(r, what))
            return target
        return self._report(_written(write), what)

    def _report(self, written: Path | str, what: str) -> Path | None:
        if isinstance(written, str):  # why not, in one line
            self.error(written)
            return None
        remember_export_folder(self.settings, written.parent)
        self.info(f"Saved {what} to {written}")
        return written


def _written(write: Callable[[], Path]) -> Path | str:
    """The path ``write()`` wrote, or the one line that says why it could not."""
    try:
        return Path(write())
    except InputError as exc:
        return str(exc)
    except OSError as exc:  # e.g. a folder that vanished between the dialog and the write
        return f"cannot write: {exc.strerror or exc}"


def _target_in(folder: Path) -> Path:
    """``folder`` itself when it is empty, else the first free ``attention-trace[-N]`` in it."""
    if folder.is_dir() and not any(folder.iterdir()):
        return folder
    for i in range(1, 10_000):
        candidate = folder / (f"attention-trace-{i}" if i > 1 else "attention-trace")
        if not candidate.exists():
            return candidate
    raise InputError(f"too many attention-trace folders in {folder}")
