"""Issue 32: one executor for every job (explorer/executor.py): lanes in order, a device queue that
never lets two jobs compute on the same stores at once, the window's reads and long jobs on it."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from explorer.executor import EXECUTOR, Executor


def test_a_lane_runs_its_jobs_one_at_a_time_in_order():
    executor, seen, inside = Executor(threads=3), [], []
    for i in range(20):

        def job(i=i):
            inside.append(1)
            assert len(inside) == 1  # never two of one lane at once
            seen.append(i)
            inside.pop()

        executor.start(job, lane="reads")
    assert executor.wait_until_idle()
    assert seen == list(range(20))


def test_the_device_queue_lets_one_job_at_a_time_compute_and_counts_who_waits():
    executor = Executor(threads=3)
    queue = executor.device("cuda:0 (NVIDIA A100)")
    assert queue is executor.device("cuda") and queue is not executor.device("cpu")
    release, at_once, holders = threading.Event(), [], []

    def hold():
        with queue.turn():
            holders.append(1)
            at_once.append(len(holders))
            release.wait(5)
            holders.pop()

    executor.start(hold)
    executor.start(hold)
    while not (holders and queue.waiting == 1):
        pass  # the second job waits for its turn
    release.set()
    assert executor.wait_until_idle()
    assert at_once == [1, 1] and queue.waiting == 0


def test_force_sync_runs_a_job_at_once_on_the_calling_thread():
    executor, threads = Executor(), []
    with executor.force_sync():
        executor.start(lambda: threads.append(threading.current_thread()), lane="x")
    assert threads == [threading.current_thread()] and executor.idle


def test_reads_and_long_jobs_run_on_the_one_executor(qtbot, make_window, settle):
    """No thread of its own for the read jobs, no superqt pool for the long ones: the executor's."""
    window = make_window()
    names = []
    window.jobs.call(lambda: names.append(threading.current_thread().name))
    generate = window.windows.open_generate()
    qtbot.addWidget(generate)
    generate.panel.jobs.call(lambda: names.append(threading.current_thread().name))
    assert all(name.startswith("explorer-job") for name in names), names
    assert EXECUTOR.wait_until_idle()
    assert not [t.name for t in threading.enumerate() if t.name == "explorer-reads"]


def test_a_long_job_runs_on_the_executor_and_the_latest_wins(qtbot):
    from explorer.jobs import LatestJob

    class Recorder(LatestJob):
        def work(self, generation, should_stop, release, seen):
            release.wait(5)
            seen.append((generation, threading.current_thread().name, should_stop()))

    job, release, seen = Recorder(), threading.Event(), []
    first = job.submit(release, seen)
    second = job.submit(release, seen)
    release.set()
    qtbot.waitUntil(lambda: len(seen) == 2 and not job.busy)
    assert {g: stop for g, _name, stop in seen} == {first: True, second: False}  # the first was replaced
    assert all(name.startswith("explorer-job") for _g, name, _stop in seen)


def test_a_call_returns_its_value_raises_its_error_and_runs_at_once_in_sync_mode(qapp):
    from explorer.jobs import ReadJobs

    jobs = ReadJobs()
    assert jobs.call(lambda: threading.current_thread().name).startswith("explorer-job")
    try:
        jobs.call(lambda: 1 / 0)
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("the error was not raised again")
    with EXECUTOR.force_sync():
        assert jobs.call(lambda: threading.current_thread()) is threading.current_thread()
    jobs.shutdown()


def test_the_worker_and_the_reads_never_compute_on_one_store_at_once(qtbot, make_window, settle, monkeypatch):
    """The device queue: while the worker converts the shown run's stages in the background, the
    window's reads of the same run wait for their turn (two threads in one PairStore raced on its
    cache of blocks)."""
    from models.engine.pairs import PairStore
    from tests.explorer.conftest import SMALL

    inside: dict[int, int] = {}
    most, threads = [0], set()
    guard = threading.Lock()
    block = PairStore.block_tensor  # every block computed comes through it

    def counted(self, *args, **kwargs):
        with guard:
            inside[id(self)] = inside.get(id(self), 0) + 1
            most[0] = max(most[0], inside[id(self)])
            threads.add(threading.current_thread().name)
        try:
            threading.Event().wait(0.02)  # a wide window for two threads to meet in the store
            return block(self, *args, **kwargs)
        finally:
            with guard:
                inside[id(self)] -= 1

    n = 800  # 800² × 4 heads × 3 pair stages: more than CONVERT_ALL_BELOW, converted in the background
    window = make_window(SMALL.__class__(sentence=" ".join(f"w{i}" for i in range(n)), heads=4, d_model=16))
    monkeypatch.setattr(PairStore, "block_tensor", counted)

    def read_all(display):  # as soon as a run is shown, while the worker converts its other stages
        for name in ("scores", "scaled"):
            for head in range(4):
                window.jobs.ask(f"read {name} {head}", lambda s=name, h=head: display.trace[s].rows(h, 0, n),
                                lambda _v: None)  # fmt: skip

    window.state.trace_changed.connect(read_all)
    window.state.update_inputs(seed=5)
    settle(window, timeout=60_000)
    display = window.state.display
    qtbot.waitUntil(lambda: set(display.images) == set(display.trace.names), timeout=60_000)
    assert window.jobs.wait_until_idle(timeout=60) and EXECUTOR.wait_until_idle()
    assert len(threads) >= 2  # the worker and the executor both computed blocks of the store
    assert most[0] == 1


def test_a_long_turn_lets_a_waiting_job_go_first_then_goes_on():
    executor, order = Executor(threads=2), []
    queue = executor.device("cpu")
    holding, done = threading.Event(), threading.Event()

    def long_conversion():
        with queue.turn():
            order.append("conversion starts")
            holding.set()
            while not queue.waiting:
                pass  # until the read waits
            queue.yield_turn()  # between two bands
            order.append("conversion ends")
        done.set()

    def read():
        holding.wait(5)
        with queue.turn():
            order.append("read")

    executor.start(long_conversion)
    executor.start(read)
    assert done.wait(5) and executor.wait_until_idle()
    assert order == ["conversion starts", "read", "conversion ends"]


def test_a_read_never_waits_behind_a_long_job_while_threads_remain():
    executor, release, read = Executor(threads=3), threading.Event(), threading.Event()
    executor.start(lambda: release.wait(5))  # a survey, say
    executor.start(lambda: None)  # done at once: its thread is free again
    assert executor.wait_until_idle(timeout=0.5) is False  # the long one still runs
    executor.start(lambda: release.wait(5))  # a second long job
    executor.start(read.set, lane="reads")
    assert read.wait(5)  # ran beside the long jobs
    release.set()
    assert executor.wait_until_idle()


def test_a_lane_keeps_to_one_thread_while_that_thread_is_free():
    """The compute worker's jobs (its lane) ran on whichever pool thread woke first: each change's
    trace was then allocated in another thread's malloc arena, thousands of fresh pages faulted in
    per change (bench_gui at 64 tokens: latency 26 -> 37 ms). A lane's job now goes to the thread
    that ran the lane's last one when that thread is free, the panels' reads still running beside it."""
    executor, release = Executor(threads=4), threading.Event()
    for _ in range(4):  # four threads, all free again
        executor.start(lambda: release.wait(5))
    release.set()
    assert executor.wait_until_idle()
    compute, window = [], object()
    for _ in range(16):
        executor.start(lambda: compute.append(threading.current_thread().name), lane="compute")
        assert executor.wait_until_idle()
        for _ in range(5):  # the panels' reads after a result (hover, focus, numbers, ...)
            executor.start(lambda: None, lane=id(window))
            assert executor.wait_until_idle()
        for _ in range(2):  # and some still running at the next change
            executor.start(lambda: threading.Event().wait(0.005), lane=id(window))  # as ReadJobs names its lane
        executor.start(lambda: threading.Event().wait(0.005))
    assert executor.wait_until_idle()
    assert len(compute) == 16 and len(set(compute)) == 1, compute


def test_a_stopped_lanes_thread_goes_to_the_next_lane():
    """A window's worker stopped kept its thread as its lane's home: the next window's worker started on a
    new thread, whose malloc arena had none of the memory freed before (bench_gui: ~15,000 more page
    faults loading MiniLM after two toy windows). Forgotten, its thread serves the next lane."""
    executor, names = Executor(threads=4), []
    run = lambda: names.append(threading.current_thread().name)  # noqa: E731
    executor.start(run, lane="first window")
    assert executor.wait_until_idle()
    executor.forget("first window")
    executor.start(run, lane="second window")
    assert executor.wait_until_idle()
    assert names[0] == names[1]


EXPLORER = Path(__file__).resolve().parents[2] / "explorer"
# A thread, a pool or a worker object of its own: only the executor makes them.
THREADS = re.compile(r"\bQThread\b|threading\.Thread\b|\bThread\(|\bQThreadPool\b|\bQRunnable\b|ThreadPoolExecutor"
                     r"|\bthread_worker\b|\bcreate_worker\b|\bGeneratorWorker\b|\bmultiprocessing\b")  # fmt: skip


def test_no_module_but_the_executor_makes_a_thread():
    """One job design (issue 32): every job of the window (compute, reads, survey, generation, atlas,
    timeline) is started on explorer/executor.py; no module makes a thread or a pool of its own."""
    makers = {}
    for path in sorted(EXPLORER.rglob("*.py")):
        name = path.relative_to(EXPLORER).as_posix()
        lines = [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if THREADS.search(line)]
        if lines and name != "executor.py":
            makers[name] = lines
    assert makers == {}


def test_the_compute_worker_runs_on_the_executor_and_holds_no_thread_when_idle(qtbot):
    """The compute worker's jobs are the executor's (kind "compute", its own lane); a newer request
    still replaces an older one, and with nothing to do the worker holds no thread."""
    from explorer.engine.worker import ComputeWorker
    from models.config import AttentionConfig, AttentionRequest
    from models.engine.pipeline import run

    names, release = [], threading.Event()

    def recording(request, should_stop):
        names.append(threading.current_thread().name)
        if request.sentence == "slow":
            release.wait(10)
        return run(request, should_stop)

    worker = ComputeWorker({AttentionRequest: recording})
    assert worker.idle  # made, nothing asked: no job, no thread
    answered = []
    worker.result_ready.connect(lambda display: answered.append(display.generation))
    worker.submit(AttentionRequest(AttentionConfig(heads=1, d_model=4), "slow"))
    qtbot.waitUntil(lambda: len(names) == 1)
    latest = worker.submit(AttentionRequest(AttentionConfig(heads=1, d_model=4), "a b c"))
    release.set()
    qtbot.waitUntil(lambda: answered == [latest] and worker.idle, timeout=10_000)
    assert len(names) == 2 and all(name.startswith("explorer-job") for name in names), names
    worker.stop()
