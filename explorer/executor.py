"""The one executor of the app's jobs off the GUI thread (issue 32). Qt-free.

Every job runs on its pool: the compute worker's (explorer/engine/worker.py: models loaded, traces
made, stages converted to images; its own lane), each window's reads (explorer.jobs.ReadJobs: hover,
focus, numbers, derivations, comparisons, exports, a file checked before it opens, the training
timeline), and every long job (explorer.jobs.LatestJob: the whole-model survey, generation, the head
atlas). No other module makes a thread (tests/explorer/test_executor.py greps for them).

- **Lanes.** Jobs of one lane run one at a time, in order (a window's reads: its own lane, so that
  an answer never overtakes an earlier one of the same window); lanes run side by side.
- **Latest wins** per kind: the callers' tickets and generations (ReadJobs, LatestJob) say which
  answer is still wanted; a job replaced before it starts does no work.
- **One device queue** per device (``device("cpu")``, ``device("cuda:0")``): a job that computes on
  a lazy store (a read of the shown run's stages; the worker converting the shown run's stages to
  images) holds its device's queue, so two jobs never compute on the same store at once, on a GPU
  as on the CPU. A long conversion lets a waiting read have its turn between two of its bands
  (:meth:`DeviceQueue.yield_turn`), then goes on.
- **A lane keeps to its thread.** A lane's job goes to the thread that ran the lane's last job when
  that thread is free; another job to a free thread that is no lane's home, else a new one, else any
  free one. The compute worker's traces are then allocated where the last were freed (that thread's
  malloc arena): on whichever thread woke first, each change faulted in thousands of fresh pages
  (bench_gui at 64 tokens: 26 -> 37 ms from submit to paint).
- **Tests** wait with :meth:`Executor.wait_until_idle` (every job started has ended), as napari's
  slicer does.
"""

from __future__ import annotations

import queue
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

HOMES = 4  # lanes whose thread is remembered (the compute worker's, a few windows' reads)
THREADS = 8  # the reads of three windows and a few long jobs at once (idle ones cost nothing; torch has its own)


class DeviceQueue:
    """One turn at a time on a device's stores, first come first served (a ticket lock); a turn may
    be taken again by its holder (a stage whose reading reads another). :attr:`waiting` says how many
    jobs wait; :meth:`yield_turn` lets them go first, then carries on (a long conversion, between
    two bands)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = self._serving = 0  # the next ticket given; the ticket whose turn it is
        self._owner: int | None = None
        self._depth = 0
        self.waiting = 0

    def acquire(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return
            self._wait_for_turn(me, 1)

    def release(self) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._hand_over()

    def yield_turn(self) -> None:
        """When jobs wait, let them have their turns, then take it back (at the end of the queue)."""
        me = threading.get_ident()
        with self._cond:
            if not self.waiting or self._owner != me:
                return
            depth = self._depth
            self._hand_over()
            self._wait_for_turn(me, depth)

    @contextmanager
    def turn(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def _wait_for_turn(self, me: int, depth: int) -> None:  # the condition's lock held
        ticket, self._next = self._next, self._next + 1
        self.waiting += 1
        self._cond.wait_for(lambda: self._serving == ticket and self._owner is None)
        self.waiting -= 1
        self._owner, self._depth = me, depth

    def _hand_over(self) -> None:  # the condition's lock held
        self._owner, self._depth = None, 0
        self._serving += 1
        self._cond.notify_all()


class _Slot:
    """One thread of the pool: the job handed to it, and nothing else."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()


class Executor:
    """The pool every job runs on (see the module's doc); :data:`EXECUTOR` is the app's."""

    def __init__(self, threads: int = THREADS):
        # Daemon threads, started as jobs need them: a window never left open keeps no process alive.
        self._threads, self._max_threads = [], threads
        self._free: list[_Slot] = []  # threads waiting for a job, the one freed last at the end
        self._backlog: deque = deque()  # (job, lane) waiting for a thread: every one is busy
        # hash(lane) -> the thread that ran its last job (the last HOMES lanes): a lane by its value (ReadJobs name
        # theirs by id(self), a new int each time), never a reference that would keep its owner alive
        self._homes: dict[int, _Slot] = {}
        self._lock = threading.Condition()  # notified as each job ends (wait_until_idle)
        self._lanes: dict[object, deque] = {}  # lane -> jobs waiting behind its running one
        self._devices: dict[str, DeviceQueue] = {}
        self._running = 0  # jobs submitted and not ended
        self.sync = False  # every job run at once on the calling thread (tests: napari's force_sync)

    def device(self, name: str = "cpu") -> DeviceQueue:
        """The queue of the device ``name`` ("cpu", "cuda:0"; "cuda" is "cuda:0"; a trace's description,
        "cuda:0 (NVIDIA A100)", is its device)."""
        name = (name or "cpu").split(" ")[0]
        name = "cuda:0" if name == "cuda" else name
        with self._lock:
            return self._devices.setdefault(name, DeviceQueue())

    def start(self, job: Callable[[], None], lane: object | None = None) -> None:
        """Run ``job()`` on the pool; with a ``lane``, after the jobs of that lane started before it."""
        if self.sync:
            with self._lock:
                self._running += 1
            self._run(job, None, None)
            return
        with self._lock:
            self._running += 1
            if lane is not None:
                waiting = self._lanes.get(lane)
                if waiting is not None:  # the lane is busy: its running job starts this one
                    waiting.append(job)
                    return
                self._lanes[lane] = deque()
            slot = self._thread_for(lane)
            if slot is None:  # every thread busy (never behind a long job while threads remain)
                self._backlog.append((job, lane))
                return
        slot.jobs.put((job, lane))

    def _thread_for(self, lane: object | None) -> _Slot | None:  # the lock held
        """The lane's home if free; else a free thread that is no lane's home (freed last first), a new
        thread, any free thread; None when every thread is busy."""
        home = self._homes.get(hash(lane)) if lane is not None else None
        if home is not None and home in self._free:
            self._free.remove(home)
            return home
        homes = set(self._homes.values())
        for slot in reversed(self._free):
            if slot not in homes:
                self._free.remove(slot)
                return slot
        if len(self._threads) < self._max_threads:
            slot = _Slot()
            thread = threading.Thread(target=self._serve, args=(slot,), name=f"explorer-job-{len(self._threads)}",
                                      daemon=True)  # fmt: skip
            self._threads.append(thread)
            thread.start()
            return slot
        return self._free.pop() if self._free else None

    def _serve(self, slot: _Slot) -> None:
        while True:
            self._run(*slot.jobs.get(), slot)

    def _run(self, job: Callable[[], None], lane: object | None, slot: _Slot | None) -> None:
        """``job``, then the jobs waiting behind it in its lane, then (on a pool thread) the backlog's;
        the thread is free again in the same locked step that counts its last job ended."""
        while True:
            if lane is not None and slot is not None:
                self._home(lane, slot)
            try:
                job()
            except BaseException:  # noqa: BLE001 - the callers catch their own; a bug must not stop the lane
                traceback.print_exc()
            with self._lock:
                self._running -= 1
                self._lock.notify_all()
                waiting = self._lanes.get(lane) if lane is not None else None
                if waiting:
                    job = waiting.popleft()
                    continue
                self._lanes.pop(lane, None)
                if slot is None:
                    return
                if self._backlog:
                    job, lane = self._backlog.popleft()
                    continue
                self._free.append(slot)
                return

    def _home(self, lane: object, slot: _Slot) -> None:
        with self._lock:
            self._homes.pop(hash(lane), None)
            self._homes[hash(lane)] = slot  # the most recent last
            while len(self._homes) > HOMES:
                del self._homes[next(iter(self._homes))]

    def forget(self, lane: object) -> None:
        """``lane`` runs no more jobs (its worker stopped): its thread is no one's home, and the next lane
        that needs a thread takes it, with the memory the stopped lane freed in its arena."""
        with self._lock:
            self._homes.pop(hash(lane), None)

    @property
    def idle(self) -> bool:
        return self._running == 0

    @contextmanager
    def force_sync(self) -> Iterator[None]:
        """Within it, every job runs at once on the thread that starts it (as napari's slicer)."""
        old, self.sync = self.sync, True
        try:
            yield
        finally:
            self.sync = old

    def wait_until_idle(self, timeout: float = 10.0) -> bool:
        """Block until every job has ended (or ``timeout`` seconds): tests. A GUI waiting for jobs that
        need its events processes them with ``frames.wait_until(lambda: EXECUTOR.idle)`` instead."""
        with self._lock:
            return self._lock.wait_for(lambda: self._running == 0, timeout)


EXECUTOR = Executor()
