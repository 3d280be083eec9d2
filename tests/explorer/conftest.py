"""Shared fixtures for the GUI tests: offscreen Qt, isolated settings, a window that has computed."""

import gc
import os
import sys
from pathlib import Path

# Before anything imports Qt: no display is needed, and none is used.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from explorer.widgets.window_size import use_desktop_offscreen_screen  # noqa: E402

use_desktop_offscreen_screen()  # the screen screenshots are taken on (1920 × 1080), not Qt's 800 × 800

import pytest  # noqa: E402

from explorer.files.persistence import SETTINGS_ENV, open_settings  # noqa: E402
from explorer.state import Inputs  # noqa: E402

HERE = Path(__file__).resolve().parent
SMALL = Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8)


@pytest.fixture(autouse=True)
def delete_closed_windows(qapp):
    """A test's closed windows (pytest-qt's deleteLater) are deleted right after it, as Qt's event loop
    would, children before parents: not left to the garbage collector, which may take a plot's Python
    objects apart before the C++ objects that use them (the likely cause, not reproduced, of one
    segmentation fault in six full runs, in the first tests/models file, where no event loop runs)."""
    yield
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def release_deleted_windows() -> int:
    """Empty the Python side of the app's widgets whose Qt side is deleted; returns how many.

    A closed, deleted MainWindow's Python object outlived its C++ one, held with its state, traces and
    models (PySide keeps a deleted widget's wrapper alive while its slots are still referenced): a full run
    grew by about 25 MB a window, to 2.8 GB by the end of tests/explorer. Its attributes are what hold the
    memory; without them the wrapper is a few bytes."""
    import shiboken6
    from PySide6.QtCore import QObject

    dead = [o for o in gc.get_objects() if isinstance(o, QObject) and type(o).__module__.startswith("explorer.")
            and not shiboken6.isValid(o)]  # fmt: skip
    for widget in dead:
        widget.__dict__.clear()
    del dead
    return gc.collect()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last GUI test (the next test is not one, or none is left), destroy the app's windows
    still open (one a test made without qtbot) and collect their Python objects, once: while Qt and
    Python are both alive, and before tests/models run, where no event loop would delete them and the
    garbage collector would take them apart at any allocation; not during interpreter finalization,
    when pyqtgraph items still alive then can crash PySide6."""
    if nextitem is not None and nextitem.path == item.path:
        return
    if nextitem is not None and HERE in Path(nextitem.path).parents:  # another GUI module next
        from PySide6.QtCore import QEvent
        from PySide6.QtWidgets import QApplication

        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        release_deleted_windows()
        return
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    for widget in QApplication.topLevelWidgets():
        if type(widget).__module__.startswith("explorer."):  # the app's windows, not pyqtgraph's menus
            widget.close()  # (its plots own and delete them: deleting them first crashed, tests/explorer/
            widget.deleteLater()  # windows_child.py)
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


_ARMED: dict = {"guard": None}
DATA_FILES = (".npy", ".npz", ".safetensors", "losses.csv", "tokenizer.json")  # what the engine reads


def _file_reads(event: str, args: tuple) -> None:
    """An audit hook (added once, it cannot be removed): while ``no_stage_reads_on_gui_thread`` is
    armed, opening an array, model or loss file is a read like a stage's (``open <suffix>``)."""
    guard = _ARMED["guard"]
    if guard is not None and event == "open" and isinstance(args[0], str | os.PathLike):
        name = os.fspath(args[0])
        suffix = next((s for s in DATA_FILES if name.endswith(s)), None)
        if suffix is not None:
            guard(f"open {suffix}")


sys.addaudithook(_file_reads)


@pytest.fixture
def no_stage_reads_on_gui_thread():
    """``arm()`` patches every read of a stage's numbers (models.engine.trace.Stage, the lazy stores'
    blocks: models.engine.pairs.PairStore), every torch call and every array, model or loss file opened
    (DATA_FILES) to fail on the GUI (main) thread, and
    returns the list of reads made after it, each ``(what, on_gui_thread)``: what the GUI then
    shows must come from explorer.jobs. ``arm.disarm()`` (also at teardown) puts them back."""
    import threading

    from torch.overrides import TorchFunctionMode

    from models.engine.pairs import PairStore
    from models.engine.trace import Stage

    reads = _ARMED["reads"] = []
    saved = {name: Stage.__dict__[name] for name in ("head", "rows", "cell", "array")}
    saved_block = PairStore.__dict__["block_tensor"]  # every block computed comes through it

    def guard(what):
        on_gui = threading.current_thread() is threading.main_thread()
        reads.append((what, on_gui))
        if on_gui:
            raise AssertionError(f"{what} read on the GUI thread")

    class NoTorchHere(TorchFunctionMode):
        """Torch's function modes are per thread: entered on the GUI thread, only its calls come here."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            guard(f"torch {getattr(func, '__name__', func)}")
            return func(*args, **(kwargs or {}))

    modes = []

    def arm():
        for name in ("head", "rows", "cell"):
            def guarded(self, *args, _original=saved[name], _name=name):
                guard(f"Stage.{_name}")
                return _original(self, *args)

            setattr(Stage, name, guarded)
        Stage.array = property(lambda self: (guard("Stage.array"), saved["array"].fget(self))[1])

        def block(self, *args, **kwargs):
            guard("PairStore.block_tensor")
            return saved_block(self, *args, **kwargs)

        PairStore.block_tensor = block
        _ARMED["guard"] = guard  # array, model and loss files opened (the audit hook below)
        if not modes:
            modes.append(NoTorchHere())
            modes[0].__enter__()
        return reads

    def disarm():
        for name, original in saved.items():
            setattr(Stage, name, original)
        PairStore.block_tensor = saved_block
        _ARMED["guard"] = None
        while modes:
            modes.pop().__exit__(None, None, None)

    arm.disarm = disarm
    yield arm
    disarm()


@pytest.fixture
def no_thumbnails_on_gui_thread(monkeypatch):
    """Every module's ``thumbnail_indices`` fails on the GUI (main) thread; returns the list of its
    calls, each True when made there (issue 18: a resize makes thumbnails, never on the GUI thread)."""
    import threading

    import explorer.engine.generation_view
    import explorer.images.thumbnails
    import explorer.widgets.model_view

    calls = []
    original = explorer.images.thumbnails.thumbnail_indices

    def guarded(*args, **kwargs):
        on_gui = threading.current_thread() is threading.main_thread()
        calls.append(on_gui)
        if on_gui:
            raise AssertionError("thumbnail_indices on the GUI thread")
        return original(*args, **kwargs)

    for module in (explorer.images.thumbnails, explorer.widgets.model_view, explorer.engine.generation_view):
        monkeypatch.setattr(module, "thumbnail_indices", guarded)
    return calls
