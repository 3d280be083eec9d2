"""The compute worker on its own: results, latest-wins, errors, custom request kinds, shutdown."""

import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
from PySide6.QtCore import Qt

from explorer.engine.worker import ComputeWorker
from explorer.widgets.frames import DELAYS
from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine.pipeline import run


@pytest.fixture
def worker(qtbot):
    w = ComputeWorker()
    yield w
    w.stop()
    assert w.idle and w.stopped


def _request(sentence="a b c", **config):
    return AttentionRequest(config=AttentionConfig(**config), sentence=sentence)


def test_result_matches_the_engine(qtbot, worker):
    request = _request("the cat sat", heads=2, d_model=8)
    with qtbot.waitSignal(worker.result_ready, timeout=10_000) as blocker:
        generation = worker.submit(request, focus_stage="weights")
    display = blocker.args[0]
    assert display.generation == generation
    expected = run(request)
    assert display.trace.names == expected.names
    for name in expected.names:
        np.testing.assert_array_equal(display.trace[name].array, expected[name].array)
    assert set(display.images) == set(expected.names)  # small trace: every stage converted up front


def test_only_the_latest_request_is_answered(qtbot, worker):
    results = []
    worker.result_ready.connect(lambda d: results.append(d.generation))
    for i in range(30):
        last = worker.submit(_request(" ".join(f"w{j}" for j in range(i + 1)), heads=1, d_model=4))
    qtbot.waitUntil(lambda: last in results, timeout=10_000)
    assert results == sorted(results) and results[-1] == last


def test_input_error_becomes_a_message_and_the_worker_goes_on(qtbot, worker):
    with qtbot.waitSignal(worker.failed, timeout=10_000) as blocker:
        worker.submit(_request(""))
    assert "empty" in blocker.args[1]
    with qtbot.waitSignal(worker.result_ready, timeout=10_000):
        worker.submit(_request("back again"))


def test_an_engine_crash_is_reported_not_raised(qtbot):
    def broken(request, should_stop):
        raise RuntimeError("boom")

    worker = ComputeWorker(runners={AttentionRequest: broken})
    try:
        with qtbot.waitSignal(worker.failed, timeout=10_000) as blocker:
            worker.submit(_request())
        assert "RuntimeError" in blocker.args[1] and "boom" in blocker.args[1]
        with qtbot.waitSignal(worker.failed, timeout=10_000):  # it goes on taking requests
            worker.submit(_request())
    finally:
        worker.stop()


@dataclass(frozen=True)
class OtherRequest:  # a second kind of request, as the pretrained-model chooser will bring
    sentence: str


def test_a_second_kind_of_request_uses_its_own_runner(qtbot):
    seen = []

    def other(request, should_stop):
        seen.append(request.sentence)
        return run(_request(request.sentence))

    worker = ComputeWorker(runners={AttentionRequest: run, OtherRequest: other})
    try:
        with qtbot.waitSignal(worker.result_ready, timeout=10_000):
            worker.submit(OtherRequest("from a model"))
        assert seen == ["from a model"]
    finally:
        worker.stop()


def test_stale_work_is_abandoned_at_a_stage_boundary(qtbot):
    started, release = threading.Event(), threading.Event()
    stops_seen = []

    def slow(request, should_stop):
        if request.sentence == "slow":
            started.set()
            release.wait(10)
            stops_seen.append(should_stop())
            if should_stop():
                raise InputError("cancelled")  # what pipeline.run does via Cancelled
        return run(request)

    worker = ComputeWorker(runners={AttentionRequest: slow})
    failures = []
    worker.failed.connect(lambda g, m: failures.append(m))
    try:
        worker.submit(_request("slow"))
        assert started.wait(10)
        with qtbot.waitSignal(worker.result_ready, timeout=10_000) as blocker:
            latest = worker.submit(_request("fast"))
            release.set()
        assert blocker.args[0].generation == latest
        assert stops_seen == [True]
        assert failures == []  # a stale job's failure is nobody's business
    finally:
        worker.stop()


@pytest.fixture
def lazy_worker(qtbot, monkeypatch):
    """A worker that converts only the focused stage before the result; ``arrived`` lists the
    names of the stages converted after it, in order."""
    import explorer.engine.worker as worker_module

    monkeypatch.setattr(worker_module, "CONVERT_ALL_BELOW", 0)
    worker = ComputeWorker()
    worker.arrived = []
    worker.stage_ready.connect(lambda g, image: worker.arrived.append(image.name))
    yield worker
    worker.stop()


def test_big_traces_convert_the_focused_stage_first_then_the_rest(qtbot, lazy_worker):
    worker, arrived = lazy_worker, lazy_worker.arrived
    with qtbot.waitSignal(worker.result_ready, timeout=10_000) as blocker:
        worker.submit(_request("one two three", heads=2, d_model=8), focus_stage="scores")
    display = blocker.args[0]
    assert list(display.images) == ["scores"]
    qtbot.waitUntil(lambda: len(arrived) == len(display.trace.names) - 1, timeout=10_000)
    # Nearest stages first, the next one before the previous one at equal distance.
    assert arrived[:4] == ["scaled", "v", "weights", "k"]


def test_stages_of_the_shown_trace_still_arrive_after_a_failed_request(qtbot, monkeypatch):
    import explorer.engine.worker as worker_module

    monkeypatch.setattr(worker_module, "CONVERT_ALL_BELOW", 0)
    worker = ComputeWorker()
    arrived = []
    worker.stage_ready.connect(lambda g, image: arrived.append(image.name))

    def submit_a_bad_request(_display):
        # Runs on the worker thread as the result is emitted, before any background conversion:
        # from now on the shown trace is superseded and only converts stages when asked.
        worker.result_ready.disconnect(submit_a_bad_request)
        worker.submit(_request(""))

    worker.result_ready.connect(submit_a_bad_request, Qt.ConnectionType.DirectConnection)
    try:
        with qtbot.waitSignal(worker.failed, timeout=10_000):
            shown = worker.submit(_request("one two three"), focus_stage="weights")
        assert arrived == []
        with qtbot.waitSignal(worker.stage_ready, timeout=10_000) as ready:
            worker.prepare(shown, "q")
        assert ready.args[0] == shown and ready.args[1].name == "q"
    finally:
        worker.stop()


def test_background_conversion_waits_until_the_result_is_painted(qtbot, lazy_worker, monkeypatch):
    """Converting takes the interpreter lock in bursts: not while the GUI paints the result."""

    monkeypatch.setitem(DELAYS, "quiet after result", 60_000)  # only the GUI's "idle" ends it
    worker, arrived = lazy_worker, lazy_worker.arrived
    with qtbot.waitSignal(worker.result_ready, timeout=10_000) as blocker:
        worker.submit(_request("one two three", heads=2, d_model=8), focus_stage="scores")
    display = blocker.args[0]
    qtbot.wait(300)
    assert arrived == []  # not painted yet: nothing converted behind the GUI's back
    with qtbot.waitSignal(worker.stage_ready, timeout=10_000):
        worker.prepare(display.generation, "q")  # what the GUI asks for still comes at once
    assert arrived == ["q"] and worker.gui_busy  # busy from the hand-over of a result
    worker.set_gui_busy(False)  # the GUI's frame scheduler: every phase done (the result painted)
    qtbot.waitUntil(lambda: len(arrived) == len(display.trace.names) - 1, timeout=10_000)


def test_a_stage_asked_for_interrupts_a_background_conversion(qtbot, lazy_worker, monkeypatch):
    """Stepping to a stage not converted yet waited for a background conversion of another
    (~1 s for a 2048-token stage): the asked one now goes first, the other is converted after."""
    import threading

    import explorer.engine.worker as worker_module
    import models.reads.read as read_module  # every picture the worker makes is a read (issue 46)

    real = read_module.stage_image
    in_background, interrupted = threading.Event(), []

    def slow_scaled(stage, fit, should_stop=None, **kwargs):
        if stage.name == "scaled" and not interrupted:  # the first background stage: blocks until told
            in_background.set()
            for _ in range(2000):
                if should_stop():
                    interrupted.append(stage.name)
                    raise worker_module.Cancelled()
                time.sleep(0.005)
        return real(stage, fit, should_stop=should_stop, **kwargs)

    monkeypatch.setattr(read_module, "stage_image", slow_scaled)
    worker, arrived = lazy_worker, lazy_worker.arrived
    with qtbot.waitSignal(worker.result_ready, timeout=10_000) as blocker:
        worker.submit(_request("one two three", heads=2, d_model=8), focus_stage="scores")
    display = blocker.args[0]
    worker.set_gui_busy(False)
    assert in_background.wait(10)
    worker.prepare(display.generation, "input")
    qtbot.waitUntil(lambda: len(arrived) == len(display.trace.names) - 1, timeout=10_000)
    assert interrupted == ["scaled"]
    assert arrived[:2] == ["input", "scaled"]  # the asked stage first, then the interrupted one resumed


def test_a_toy_change_draws_its_random_weights_once(qtbot, worker, monkeypatch):
    """The run drew the seeded weights and the layer's parameters (the inspector's) drew them again,
    ~5 ms of a 64-token change; one draw now serves both."""
    from models.engine import pipeline, weights

    draws, draw = [], weights.random_weights

    def counted(cfg):
        draws.append(cfg.seed)
        return draw(cfg)

    monkeypatch.setattr(weights, "random_weights", counted)
    monkeypatch.setattr(pipeline, "random_weights", counted, raising=False)  # the run's own name for it, before
    for seed in (8_100_001, 8_100_002):  # seeds no other test draws: each change's first draw
        with qtbot.waitSignal(worker.result_ready, timeout=10_000) as blocker:
            worker.submit(_request("the cat sat", heads=2, d_model=8, seed=seed), focus_stage="weights")
        params = blocker.args[0].params
        assert params is not None and params.W_q.shape == (2, 8, 4)
    assert draws == [8_100_001, 8_100_002]
