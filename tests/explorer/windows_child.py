"""Run by test_windows_fit_screen in a process of its own (the screen is fixed when Qt starts):
opens every kind of top-level window on the offscreen screen it is given and prints, as one JSON
object, the screen's free area and each window's size and minimum size hint."""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "models")]

from PySide6.QtCore import QCoreApplication, QEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def pump(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QCoreApplication.processEvents()
        time.sleep(0.005)


def main() -> None:
    app = QApplication([])
    from encdec_refs import SOURCE, TARGET, build

    from explorer.files.persistence import open_settings
    from explorer.panels.atlas_window import AtlasWindow
    from explorer.panels.generate_panel import GenerateWindow
    from explorer.state import Inputs
    from explorer.window import MainWindow
    from models.pretrained import load_model

    tmp = Path(tempfile.mkdtemp())
    settings = open_settings(tmp / "settings.ini")
    area = app.primaryScreen().availableGeometry()
    sizes: dict[str, list[int]] = {}
    opened = []

    def measure(name: str, window) -> None:
        opened.append(window)
        window.show()
        pump(0.5)
        hint = window.minimumSizeHint()
        sizes[name] = [window.width(), window.height(), hint.width(), hint.height()]

    main_window = MainWindow(settings, Inputs(sentence="The cat sat on the mat.", model="minilm"), persist=False)
    pump(2)
    measure("main", main_window)
    main_window.compare.pin()
    pump(0.5)
    measure("compare", main_window.compare.view)
    measure("pe-lens", main_window.windows.open_pe_lens())
    measure("model", main_window.windows.open_survey(model=True))
    measure("generate", GenerateWindow(lambda name: load_model(name), "induction"))
    measure("atlas", AtlasWindow(None))
    folder = tmp / "t5"
    folder.mkdir()
    build(folder, "t5")
    encdec = MainWindow(settings, Inputs(sentence=SOURCE, cross_sentence=TARGET, model=str(folder)), persist=False)
    opened.append(encdec)
    pump(2)
    measure("encdec-model", encdec.windows.open_survey(model=True))
    induction = MainWindow(settings, Inputs(sentence="abcabc", model="induction"), persist=False)
    opened.append(induction)
    pump(1)
    measure("timeline", induction.windows.open_timeline())
    print(json.dumps({"screen": [area.width(), area.height()], "windows": sizes}), flush=True)
    # Only the windows it opened (their workers stop as they close). Every top-level widget would
    # include pyqtgraph's context menus, which their plots own and delete: deleting them first crashed.
    for window in opened:
        window.close()
        window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()


if __name__ == "__main__":
    main()
