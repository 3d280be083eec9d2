"""Reads the GUI needs, answered off the GUI thread: the latest ask of each kind wins.

A view that needs numbers from a trace (a comparison of two runs, ...) asks here with a plain
function of the traces; the function runs on the app's one executor (explorer/executor.py: this
object's own lane, in order, each read holding the device queue of the shown run's stores) and its
value (plain numpy, images) is handed to the view's callback on the GUI thread. An answer to an ask that a newer ask
of the same kind has replaced is dropped, never shown. Tests (and screenshots) wait for the
answers with :meth:`ReadJobs.wait_until_idle`, as napari's slicer does, instead of polling.

An ask made with ``held=True`` (a panel beside the heatmaps: the focus) is not handed over while
``busy()`` says a result's heatmaps are on their way to the screen (the window's frame scheduler,
explorer.widgets.frames): it waits for :meth:`release` (the scheduler idle again) or the delay
``"hold answer"`` (frames.DELAYS), so that its update never lengthens one of their turns. It is still
pending meanwhile: ``wait_until_idle`` waits for it.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from contextlib import nullcontext

from PySide6.QtCore import QObject, Signal

from explorer.executor import EXECUTOR
from explorer.widgets.frames import later, wait_until
from models.config import InputError

Deliver = Callable[[object], None]


class ReadJobs(QObject):
    """``ask(kind, compute, deliver)``: ``compute()`` on the executor, ``deliver(value)`` on this thread."""

    _answered = Signal(str, int, object, object)  # kind, ticket, value, exception (or None)
    failed = Signal(str, str)  # kind, one-line message: a read that raised (shown in the status bar)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._lock = threading.Condition()  # notified as each job ends (shutdown waits for it)
        self._running = 0  # jobs started on the executor and not ended
        # The device whose lazy stores these reads compute on (the main window's: its shown run's), or
        # None: reads of plain arrays, beside any job.
        self.device: Callable[[], str] | None = None
        self._latest: dict[str, int] = {}  # kind -> ticket of the newest ask
        self._callbacks: dict[str, Deliver] = {}
        self._pending = 0  # asks not answered on this thread yet
        self._tickets = 0
        self._calls = 0  # call()s made: each its own kind
        self._loops: set = set()  # the event loops of the calls waiting for their answer
        self._held_kinds: set[str] = set()  # kinds whose answers wait while busy()
        self._held: list[tuple[str, int, object, object]] = []  # answers waiting for release()
        self.busy: Callable[[], bool] | None = None  # the GUI is busy showing a result (set by the window)
        # Emitted on the executor's threads, delivered queued on the thread this object lives on (the GUI's).
        self._answered.connect(self._deliver)

    def ask(self, kind: str, compute: Callable[[], object], deliver: Deliver, held: bool = False,
            in_order: bool = True) -> int:  # fmt: skip
        """Run ``compute`` off this thread; ``deliver`` its value here unless a newer ``kind`` ask came
        (``held``: not while :attr:`busy`, see the module's doc; ``in_order``: on this object's lane of
        the executor, after the asks before it, taking turns on the device queue; else beside them, on
        no store: a call)."""
        (self._held_kinds.add if held else self._held_kinds.discard)(kind)
        with self._lock:
            self._tickets += 1
            ticket = self._tickets
            self._latest[kind] = ticket
            self._callbacks[kind] = deliver
            self._pending += 1
            self._running += 1
        on_store = in_order  # reads of the shown run; a call (a file, the timeline) reads none
        EXECUTOR.start(lambda: self._run(kind, ticket, compute, on_store), lane=id(self) if in_order else None)
        return ticket

    def call(self, compute: Callable[[], object]) -> object:
        """``compute()`` off this thread, waiting for its value (or raising its exception) in an event
        loop of its own: the window keeps painting and this thread computes nothing (a file checked
        before it is opened, the training timeline built)."""
        from PySide6.QtCore import QEventLoop

        box: dict[str, object] = {}

        def run() -> None:
            try:
                box["value"] = compute()
            except Exception as exc:  # noqa: BLE001 - raised again on the calling thread
                box["error"] = exc

        loop = QEventLoop()
        with self._lock:
            self._calls += 1
            kind = f"call {self._calls}"
        answered: list[bool] = []

        def arrived(_none: object) -> None:
            answered.append(True)
            loop.quit()

        self._loops.add(loop)
        self.ask(kind, run, arrived, in_order=False)  # a long one (the timeline) never holds up the reads
        if not answered:  # already answered when the executor runs jobs at once (force_sync)
            loop.exec()
        self._loops.discard(loop)
        with self._lock:
            self._latest.pop(kind, None)
            self._callbacks.pop(kind, None)
        if "error" in box:
            raise box["error"]
        if "value" not in box:  # the window closed meanwhile (shutdown)
            raise InputError("cancelled: the window is closing")
        return box["value"]

    def cancel(self, kind: str) -> None:
        """Forget the asks of ``kind`` (their answers are dropped when they come)."""
        with self._lock:
            self._latest[kind] = -1

    @property
    def idle(self) -> bool:
        return self._pending == 0

    def wait_until_idle(self, timeout: float = 10.0) -> bool:
        """Process events until every ask has been answered (or ``timeout`` seconds); True when idle."""
        return wait_until(lambda: self.idle, timeout)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Drop the asks not started and wait for the one running (the window is closing)."""
        with self._lock:
            self._latest.clear()
        self._held = []
        for loop in list(self._loops):  # a call waiting: it returns (cancelled)
            loop.quit()
        with self._lock:
            self._lock.wait_for(lambda: not self._running, timeout)

    # --- on the executor -----------------------------------------------------------------------
    def _run(self, kind: str, ticket: int, compute: Callable[[], object], on_store: bool = True) -> None:
        try:
            if self._latest.get(kind) != ticket:  # replaced before it started: no work at all
                self._answered.emit(kind, ticket, None, None)
                return
            try:
                device = self.device() if self.device is not None and on_store else None
                with EXECUTOR.device(device).turn() if device else nullcontext():  # one job on a store at once
                    value, error = compute(), None
            except Exception as exc:  # noqa: BLE001 - every failure becomes a message on the GUI thread
                value, error = None, exc
            self._answered.emit(kind, ticket, value, error)
        finally:
            with self._lock:
                self._running -= 1
                self._lock.notify_all()

    # --- back on the GUI thread ----------------------------------------------------------------
    def release(self, *_) -> None:
        """Hand over the answers held while the GUI was busy (it has painted)."""
        held, self._held = self._held, []
        for answer in held:
            self._deliver(*answer, holding=False)

    def _deliver(self, kind: str, ticket: int, value: object, error: object, holding: bool = True) -> None:
        if holding and kind in self._held_kinds and self.busy is not None and self.busy():
            if not self._held:
                later("hold answer", self, self.release)  # never held for longer
            self._held.append((kind, ticket, value, error))
            return
        with self._lock:
            self._pending -= 1
            current = self._latest.get(kind) == ticket
            callback = self._callbacks.get(kind)
        if not current or callback is None:
            return
        if error is not None:
            if not isinstance(error, InputError):
                traceback.print_exception(error)
            self.failed.emit(kind, str(error).split("\n")[0])
            return
        callback(value)


class LatestJob(QObject):
    """One kind of long job (a whole-model survey, a generation, an atlas, ...): each submit runs
    :meth:`work` on the app's executor (explorer/executor.py); a newer submit (or :meth:`cancel`) makes the
    running one's ``should_stop()`` true, and it stops at its next step and sends nothing more.
    Every failure reaches the GUI as one line (``failed``), never a traceback or a lost thread.

    Subclasses implement ``work(generation, should_stop, *args)`` and emit their own signals from it
    (queued to the GUI thread), checking :meth:`is_current` before each."""

    failed = Signal(int, str)  # generation, one-line message
    # What a MemoryError says: the subclass names what to ask for less of.
    out_of_memory = "not enough memory for this job"

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.generation = 0
        self._lock = threading.Lock()
        self._running: dict[int, threading.Event] = {}

    def submit(self, *args) -> int:
        """Run ``work(generation, should_stop, *args)`` off the GUI thread; returns the generation."""
        generation, done = self._next()
        EXECUTOR.start(lambda: self._guarded(generation, done, *args))
        return generation

    def run_now(self, *args) -> int:
        """The same work on the calling thread (tests, screenshots); its signals arrive directly."""
        generation, done = self._next()
        self._guarded(generation, done, *args)
        return generation

    def is_current(self, generation: int) -> bool:
        return generation == self.generation

    def cancel(self) -> None:
        with self._lock:
            self.generation += 1

    @property
    def busy(self) -> bool:
        return any(not e.is_set() for e in list(self._running.values()))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel and wait for the running job to stop (before its panel goes away)."""
        self.cancel()
        for event in list(self._running.values()):
            event.wait(timeout_s)

    def work(self, generation: int, should_stop: Callable[[], bool], *args) -> None:
        raise NotImplementedError

    def _next(self) -> tuple[int, threading.Event]:
        with self._lock:
            self.generation += 1
            done = self._running[self.generation] = threading.Event()
            return self.generation, done

    def _guarded(self, generation: int, done: threading.Event, *args) -> None:
        from explorer.engine.job_results import leave_a_core_to_the_gui
        from models.config import Cancelled

        leave_a_core_to_the_gui()
        try:
            self.work(generation, lambda: not self.is_current(generation), *args)
        except Cancelled:
            pass
        except InputError as exc:
            self.failed.emit(generation, str(exc))
        except MemoryError:
            self.failed.emit(generation, self.out_of_memory)
        except Exception as exc:  # noqa: BLE001 - an engine bug: one line rather than a lost thread
            traceback.print_exception(exc)
            self.failed.emit(generation, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._running.pop(generation, None)
            done.set()
