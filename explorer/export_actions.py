"""Export matrix (.npy), export all (folder + manifest.json, as `main.py export`), save image (PNG or SVG
of the matrix view or of the whole window).

The file dialogs sit behind :meth:`ExportActions.ask_save_path` and :meth:`ExportActions.ask_folder`
so that tests can replace them. Every failure is one line in the status bar, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QSettings
from PySide6.QtWidgets import QFileDialog, QWidget

from models.config import InputError
from models.export import write_array, write_trace

from .heads import array_head, is_kv_stage
from .image_export import NAME_FILTER, save_scene, save_widget, save_widget_png
from .persistence import export_folder, remember_export_folder
from .state import ALL_HEADS, ExplorerState

Report = Callable[[str], None]


class ExportActions(QObject):
    def __init__(self, parent: QWidget, state: ExplorerState, image_source: QWidget, settings: QSettings,
                 info: Report, error: Report):  # fmt: skip
        super().__init__(parent)
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
        """The shown stage's array: every head, or only the one on screen when one is picked."""
        if (display := self._display_or_complain()) is None:
            return None
        stage = display.trace[self.state.stage_name]
        one_head = stage.per_head and self.state.head != ALL_HEADS
        head = array_head(stage, self.state.head) if one_head else 0  # a GQA key/value head for k, v
        array = stage.head(head) if one_head else stage.array
        kind = "kvhead" if is_kv_stage(stage) else "head"
        name = f"{stage.name}_{kind}{head}.npy" if one_head else f"{stage.name}.npy"
        chosen = self.ask_save_path("Export matrix", export_folder(self.settings) / name, "NumPy array (*.npy)")
        if not chosen:
            return None
        return self._write(lambda: write_array(array, chosen), f"{stage.title} {'×'.join(map(str, array.shape))}")

    def export_all(self) -> Path | None:
        """Every stage + manifest.json into the chosen folder if it is empty, else into a new
        subfolder of it (never over someone's files)."""
        if (display := self._display_or_complain()) is None:
            return None
        chosen = self.ask_folder("Export all stages into folder", export_folder(self.settings))
        if not chosen:
            return None
        trace = display.trace
        return self._write(lambda: write_trace(trace, _target_in(Path(chosen))),
                           f"{len(trace.stages)} stages + manifest.json")  # fmt: skip

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

    def _write(self, write: Callable[[], Path], what: str) -> Path | None:
        try:
            path = Path(write())
        except InputError as exc:
            self.error(str(exc))
            return None
        except OSError as exc:  # e.g. a folder that vanished between the dialog and the write
            self.error(f"cannot write: {exc.strerror or exc}")
            return None
        remember_export_folder(self.settings, path.parent)
        self.info(f"Saved {what} to {path}")
        return path


def _target_in(folder: Path) -> Path:
    """``folder`` itself when it is empty, else the first free ``attention-trace[-N]`` in it."""
    if folder.is_dir() and not any(folder.iterdir()):
        return folder
    for i in range(1, 10_000):
        candidate = folder / (f"attention-trace-{i}" if i > 1 else "attention-trace")
        if not candidate.exists():
            return candidate
    raise InputError(f"too many attention-trace folders in {folder}")
