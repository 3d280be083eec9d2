"""Shared fixtures for the GUI tests: offscreen Qt, isolated settings, a window that has computed."""

import gc
import os

# Before anything imports Qt: no display is needed, and none is used.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from explorer.persistence import SETTINGS_ENV, open_settings  # noqa: E402
from explorer.state import Inputs  # noqa: E402

SMALL = Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8)


@pytest.fixture(autouse=True, scope="session")
def delete_widgets_before_exit(qapp):
    """Destroy every widget while Qt and Python are both alive, not during interpreter
    finalization, when pyqtgraph items still alive then can crash PySide6."""
    yield
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    for widget in QApplication.topLevelWidgets():
        widget.close()
        widget.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path, monkeypatch):
    """Every test gets its own INI file: the user's settings are never read or written."""
    path = tmp_path / "settings.ini"
    monkeypatch.setenv(SETTINGS_ENV, str(path))
    return path


@pytest.fixture
def settings(isolated_settings):
    return open_settings(isolated_settings)


@pytest.fixture
def no_mouse_rate_limit():
    """pyqtgraph drops mouse moves closer than 10 ms apart; a test moves faster than a hand."""
    import pyqtgraph as pg

    old = pg.getConfigOption("mouseRateLimit")
    pg.setConfigOptions(mouseRateLimit=-1)
    yield
    pg.setConfigOptions(mouseRateLimit=old)


@pytest.fixture
def settle(qtbot):
    """``settle(window)``: wait until the window shows the result of its latest input (or its error)."""

    def wait(window, timeout=15_000):
        qtbot.waitUntil(window.is_settled, timeout=timeout)

    return wait


@pytest.fixture
def make_window(qtbot, settings, settle):
    """Build a shown main window with the given inputs and wait for its first result."""
    from explorer.window import MainWindow

    def make(inputs: Inputs = SMALL, **kwargs):
        window = MainWindow(settings, inputs, **kwargs)
        qtbot.addWidget(window)  # closed (worker stopped) at teardown
        window.show()
        qtbot.waitExposed(window)
        settle(window)
        return window

    return make
