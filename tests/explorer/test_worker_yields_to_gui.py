"""The worker keeps out of the GUI thread's way while a model loads (issue 7: no stall over 50 ms).

Reading a tokenizer holds the interpreter lock for ~40 ms (tokenizers, in Rust): the worker reads
a model only once the GUI has finished the turn that asked for it, and its progress reports are
thinned by the window's Frames to a few per second (a small model reports each of its hundred tensors)."""


from PySide6.QtCore import Qt

import explorer.engine.pretrained_runner as pretrained_runner
import models.pretrained.loader as loader
from explorer.engine.worker import ComputeWorker
from explorer.widgets.frames import DELAYS
from models.runspec import RunSpec


def test_a_model_is_read_only_once_the_gui_has_finished_its_turn(qtbot, monkeypatch):
    monkeypatch.setitem(DELAYS, "wait for gui", 30_000)  # never the timeout here
    started = []
    load_model = pretrained_runner.load_model
    monkeypatch.setattr(pretrained_runner, "load_model", lambda *a, **k: started.append(1) or load_model(*a, **k))
    worker = ComputeWorker()
    try:
        request = RunSpec(model="minilm", layer=0, sentence="The cat sat.")
        worker.set_gui_busy(True)  # the submitting turn's repaints to come
        generation = worker.submit(request, focus_stage="weights")
        qtbot.wait(300)
        assert started == []  # waiting for the GUI
        with qtbot.waitSignal(worker.result_ready, timeout=30_000) as blocker:
            worker.set_gui_busy(False)
        assert started == [1] and blocker.args[0].generation == generation
    finally:
        worker.stop()


def test_the_window_tells_the_worker_once_its_turn_is_done(qtbot, make_window, settle):
    """The one busy signal of the window's frame scheduler: set in the submitting turn, cleared
    in a later one (after the "submitted" phase and the result's phases)."""
    window = make_window()
    settle(window)
    assert not window.frames.busy and not window.worker.gui_busy
    ran = []
    window.frames.phase_ran.connect(ran.append)
    window.submit_now()
    assert window.worker.gui_busy and "submitted" in window.frames.pending()  # not inside the submitting turn
    assert ran == []
    qtbot.waitUntil(lambda: "submitted" in ran, timeout=5_000)
    settle(window)  # the result shown: the worker was told the GUI is idle again
    assert {"submitted", "result", "images", "paint"} <= set(ran) and not window.worker.gui_busy


def test_the_worker_reports_each_load_step_and_keeps_no_clock(qtbot):
    """Issue 32: the worker hands on every report (Frames, in the window, decides how often it shows)."""
    worker = ComputeWorker()
    seen = []
    worker.load_progress.connect(lambda f, m: seen.append(f), type=Qt.ConnectionType.DirectConnection)
    for i in range(100):
        worker.report_load(i / 100, f"tensor {i}")
    worker.report_load(1.0, "Loaded")
    assert seen == [i / 100 for i in range(100)] + [1.0]


def test_the_window_thins_load_progress_and_shows_its_end_at_once(qtbot, make_window, settle):
    """A hundred reports in one turn: the status line shows the first and the end, nothing after the
    end (a report still waiting never overwrites it)."""
    window = make_window()
    settle(window)
    said = []
    window.state.status.changed.connect(lambda status: said.append(status.text))
    for i in range(100):
        window.worker.load_progress.emit(i / 100, f"tensor {i}")
    assert len(said) == 1 and "tensor 0" in said[0]  # the first at once, the rest held
    window.worker.load_progress.emit(1.0, "Loaded")
    assert len(said) == 2 and said[-1].startswith("Loaded")
    qtbot.wait(3 * DELAYS["load progress"])
    assert len(said) == 2 and not window.load_bar.isVisible()
    window.worker.load_progress.emit(0.5, "a later load")
    qtbot.wait(3 * DELAYS["load progress"])
    assert "a later load" in said[-1]


def test_no_progress_is_reported_before_the_tokenizer_is_read(monkeypatch):
    """A report's handler on the GUI thread would wait out the tokenizer's hold of the lock."""
    events = []
    tokenizer = loader.ModelTokenizer
    monkeypatch.setattr(loader, "ModelTokenizer", lambda path: events.append("tokenizer") or tokenizer(path))
    loader.load_model("minilm", device="cpu", progress=lambda f, m: events.append("report"))
    assert events[0] == "tokenizer" and events.count("tokenizer") == 1 and "report" in events


def test_a_model_chosen_from_the_open_list_parses_no_tokenizer_while_it_loads(qtbot, make_window, settle,
                                                                               monkeypatch):  # fmt: skip
    """Issue 32: parsing tokenizer.json holds the interpreter lock ~30 ms (the window's longest stall
    on a load): the listed models' tokenizers are parsed when the list opens, on the executor, and a
    load then finds its tokenizer parsed."""
    import threading
    from types import SimpleNamespace

    import models.pretrained.tokenizer as tokenizer_module
    from explorer.executor import EXECUTOR

    tokenizer_module.forget_parsed()  # nothing parsed before this test
    parses, real = [], tokenizer_module.Tokenizer
    monkeypatch.setattr(tokenizer_module, "Tokenizer", SimpleNamespace(
        from_str=lambda text: parses.append(threading.current_thread().name) or real.from_str(text)))
    window = make_window()
    window.model_chooser.about_to_choose.emit()  # the list opens
    assert EXECUTOR.wait_until_idle(timeout=30)
    assert parses and all(name.startswith("explorer-job") for name in parses)
    del parses[:]
    window.state.update_inputs(model="minilm")
    settle(window, timeout=60_000)
    assert window.state.model_info is not None and window.state.model_info.name == "minilm"
    assert parses == []  # the load found it parsed


def test_a_model_chosen_from_the_keyboard_after_start_up_parses_no_tokenizer_while_it_loads(
        qtbot, make_window, settle, monkeypatch):  # fmt: skip
    """The listed models' tokenizers are also parsed once the window's first result has painted:
    a model chosen later without opening the list (the keyboard on the closed list) finds its own."""
    import threading
    from types import SimpleNamespace

    import models.pretrained.tokenizer as tokenizer_module
    from explorer.executor import EXECUTOR

    tokenizer_module.forget_parsed()
    parses, real = [], tokenizer_module.Tokenizer
    monkeypatch.setattr(tokenizer_module, "Tokenizer", SimpleNamespace(
        from_str=lambda text: parses.append(threading.current_thread().name) or real.from_str(text)))
    window = make_window()
    qtbot.waitUntil(lambda: bool(parses), timeout=10_000)
    assert EXECUTOR.wait_until_idle(timeout=30)
    assert all(name.startswith("explorer-job") for name in parses)
    del parses[:]
    window.state.update_inputs(model="minilm")
    settle(window, timeout=60_000)
    assert window.state.model_info is not None and parses == []
