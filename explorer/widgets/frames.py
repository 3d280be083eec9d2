"""The one frame scheduler: the turns of the GUI thread after a change, by name (issues 7 and 17).

A change (a result, a stage, a resize) reaches the screen in short event-loop turns, each well
under 50 ms, with input handled in between: the change's own turn (every panel updates then), then
named phases in turns of their own: the heatmaps' ``images`` (a new grid is laid out in one turn,
new labels set in the next, the images in the one after), then the ``paint`` of the canvas alone,
then ``painted`` (until the canvas has really painted). A phase is a :class:`Turn`: ``request()``
(asking again meanwhile coalesces) runs its slot in a later turn than the one that asks and after
what that turn posted (Qt delivers posted events, layout requests and paints, before any timer: a
zero-delay call would share their turn). A phase that ends on an event rather than in a turn is
:meth:`Frames.begin` … :meth:`Frames.end` (with a time limit); a view may add a condition of its
own with :meth:`Frames.watch` (heatmaps still being built, zoom regions on their way).

It is also the one owner of time (issue 32): every other wait of the window is made here, by name,
never with a QTimer or a debouncer of its own (tests/explorer/test_one_owner_of_time.py greps for them):
:func:`debounced` (a pause in typing, zooming, resizing: superqt's ``qdebounced`` under it),
:func:`throttled` (at most one call a period, the last one kept: a model load's progress, which the
worker reports for every tensor, reaches the status line so; superqt's ``qthrottled`` under it),
:func:`later` (a deferred turn, a held answer's time limit, a region's answer given up on, the compute
worker's two waits for the GUI and the next picture of a long overview asked for: explorer/engine/ keeps
no clock), :class:`Ticker` (a timer its owner starts and stops: spare heatmaps built in idle turns),
:func:`run_until` (an event loop until a condition, for screenshots) and :func:`wait_until` (events
processed until a condition, for tests and screenshots). A window has one :class:`Frames`; the windows
it opens (Generate) share it. Reading a clock only to measure (``perf_counter`` around a paint, the
worker's ``worker_ms``) decides nothing and is left where it measures.

While any phase is pending the GUI is *busy*: :attr:`Frames.busy`, and :attr:`Frames.busy_changed`
when that flips. It is the one signal the compute worker consults (it reads a model, and converts
stages in the background, only while the GUI is not busy, or once a ``later`` says it waited enough)
and the one the read jobs hold the side panels' answers on (:attr:`Frames.idle`). Tests and screenshots wait with
:meth:`Frames.wait_until_idle`, or run every pending phase at once with :meth:`Frames.flush`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal
from superqt.utils import qthrottled

from explorer.widgets.debounce import Debounced

# Every wait of the window, by name, in milliseconds (issue 46): :func:`later`, :func:`debounced`,
# :func:`throttled`, :meth:`Ticker.start` and :meth:`Frames.begin` take a name of this table (read when
# called: a test changes a delay with ``monkeypatch.setitem(frames.DELAYS, name, ms)``) or a number.
DELAYS: dict[str, int] = {
    "turn": 1,  # a phase's timer: it fires after the events its asking turn posted
    "event limit": 200,  # the longest a begun phase keeps the GUI busy when its event never comes
    "typing pause": 150,  # the sentence is recomputed once the typist pauses: a blink, not every keystroke
    "zoom pause": 120,  # zooming and panning ask the worker once they pause
    "numbers pause": 40,  # the numbers in the cells are laid out again once a zoom or resize pauses
    "resize pause": 150,  # thumbnails are made again for the new size once resizing pauses
    "shrink after": 400,  # the left column follows a narrower minimum once it has held this long
    "load progress": 50,  # a model load's progress reaches the status line and bar at most this often
    # The compute worker's two waits for the GUI end when the GUI is idle or, at the latest, after these
    # (explorer/engine/worker.py says why): before reading a model, and before converting the other
    # stages of a result in the background.
    "wait for gui": 100,
    "quiet after result": 250,
    "hold answer": 200,  # the longest a side panel's answer is held while a result's heatmaps are shown
    "hold for image": 250,  # a paint held for a stage's picture is released after this if it has not come
    "zoom patience": 30_000,  # a zoomed region's answer that never came stops counting as pending
    # a long overview: at most one picture this often while it grows (each costs ~10-25 ms a head)
    "stream every": 1000,
    "idle build": 5,  # spare heatmaps built in idle time: at most one per this many ms
}


def delay(ms: int | str) -> int:
    """``ms``, or the delay named ``ms`` in :data:`DELAYS`."""
    return DELAYS[ms] if isinstance(ms, str) else ms


class Turn:
    """One named phase: ``slot`` run once in a later turn than the one that asks. ``pending`` is
    True from :meth:`request` until the slot has run; :meth:`flush` runs it now."""

    def __init__(self, frames: Frames, name: str, slot: Callable[[], None]):
        self.name, self._frames, self._slot = name, frames, slot
        self._timer = QTimer(frames)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay("turn"))
        self._timer.timeout.connect(self._run)
        self.pending = False

    def request(self) -> None:
        if not self.pending:
            self.pending = True
            QTimer.singleShot(0, self._frames, self._arm)
            self._frames.check()

    def cancel(self) -> None:
        if self.pending:
            self.pending = False
            self._timer.stop()
            self._frames.check()

    def flush(self) -> None:
        if self.pending:
            self._run()

    def _arm(self) -> None:
        if self.pending:  # not cancelled (or run by flush) since
            self._timer.start()

    def _run(self) -> None:
        self.pending = False
        self._timer.stop()
        self._frames.phase_ran.emit(self.name)
        try:
            self._slot()
        finally:
            self._frames.check()


class Frames(QObject):
    """The phases after a change and the one "GUI busy" flag (see the module's doc)."""

    busy_changed = Signal(bool)  # emitted when busy flips (directly: the worker's handler is thread-safe)
    idle = Signal()  # busy has just become False
    phase_ran = Signal(str)  # each phase's name as its turn runs, or as its event ends it

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._turns: list[Turn] = []
        self._named: dict[str, tuple[Turn, list]] = {}  # the phases of after_this_turn, one per name (made once)
        self._begun: set[str] = set()  # phases waiting for an event
        self._limits: dict[str, QTimer] = {}  # each begun phase's time limit (kept for its next begin)
        self._probes: list[Callable[[], bool]] = []
        self._busy = False

    def turn(self, name: str, slot: Callable[[], None]) -> Turn:
        """A phase run in a turn of its own each time it is requested."""
        turn = Turn(self, name, slot)
        self._turns.append(turn)
        return turn

    def drop(self, turn: Turn) -> None:
        """Forget ``turn`` (its window is closing): cancelled, never run again."""
        turn.cancel()
        if turn in self._turns:
            self._turns.remove(turn)

    def after_this_turn(self, name: str, slot: Callable[[], None] | None = None) -> None:
        """A phase run once, after what the current turn posted: ``slot`` (or nothing: the GUI is
        busy until then). Asked again before it has run, it runs once, with every slot asked."""
        if name not in self._named:
            slots: list[Callable[[], None]] = []

            def run_slots() -> None:
                queued, slots[:] = list(slots), []
                for queued_slot in queued:
                    queued_slot()

            self._named[name] = (self.turn(name, run_slots), slots)
        turn, slots = self._named[name]
        if slot is not None:
            slots.append(slot)
        turn.request()

    def begin(self, name: str, limit_ms: int | str = "event limit") -> None:
        """A phase that ends on an event (:meth:`end`), or after ``limit_ms`` at the latest."""
        timer = self._limits.get(name)
        if timer is None:
            timer = self._limits[name] = QTimer(self)
            timer.setSingleShot(True)
            timer.timeout.connect(lambda: self.end(name))
        self._begun.add(name)
        timer.start(delay(limit_ms))
        self.check()

    def end(self, name: str) -> None:
        if name in self._begun:
            self._begun.discard(name)
            self._limits[name].stop()
            self.phase_ran.emit(name)
            self.check()

    def watch(self, probe: Callable[[], bool]) -> None:
        """Also busy while ``probe()`` is True (its owner calls :meth:`check` when it may have changed)."""
        self._probes.append(probe)

    @property
    def busy(self) -> bool:
        return bool(self._begun) or any(t.pending for t in self._turns) or any(
            p() for p in self._probes
        )

    def pending(self) -> tuple[str, ...]:
        """The names of the phases still to come (for messages and tests)."""
        return tuple(t.name for t in self._turns if t.pending) + tuple(self._begun)

    def check(self) -> None:
        """Emit :attr:`busy_changed` (and :attr:`idle`) if busy has flipped since the last check."""
        busy = self.busy
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)
            if not busy:
                self.idle.emit()

    def flush(self) -> None:
        """Run every requested phase now, in the order they were made, until none is left (a phase
        may request another): for tests and exports, as napari's force_sync."""
        for _ in range(8):
            ready = [t for t in self._turns if t.pending]
            if not ready:
                break
            for turn in ready:
                turn.flush()

    def wait_until_idle(self, timeout: float = 10.0) -> bool:
        """Process events until no phase is pending (or ``timeout`` seconds); True when idle."""
        wait_until(lambda: not self.busy, timeout)
        self.check()
        return not self.busy


def wait_until(done: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Process events until ``done()`` (or ``timeout`` seconds): tests and screenshots waiting for
    an answer (the read jobs', a Generate step's); True when done."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        QCoreApplication.processEvents()
        time.sleep(0.001)
    return done()


def debounced(func: Callable[..., object], ms: int | str, parent: QObject) -> Debounced:
    """``func(*args)`` once, ``ms`` milliseconds after the last of a burst of calls (``pending``,
    ``flush()``, ``cancel()``): typing, a zoom or a resize that pauses."""
    return Debounced(func, delay(ms), parent)


def throttled(func: Callable[..., object], ms: int | str, parent: QObject):
    """``func(*args)`` at once, then at most once every ``ms`` milliseconds with the latest arguments
    of the calls meanwhile (``cancel()`` forgets a waiting call, ``flush()`` makes it now)."""
    return qthrottled(func, timeout=delay(ms), parent=parent)


def later(ms: int | str, parent: QObject, slot: Callable[[], None]) -> None:
    """``slot()`` once, ``ms`` milliseconds from now (0: in a later turn), unless ``parent`` is gone."""
    QTimer.singleShot(delay(ms), parent, slot)


class Ticker:
    """``slot()`` every ``start(ms)`` milliseconds until ``stop()`` (0: every idle turn)."""

    def __init__(self, parent: QObject, slot: Callable[[], None], single_shot: bool = False):
        self._timer = QTimer(parent)
        self._timer.setSingleShot(single_shot)
        self._timer.timeout.connect(slot)

    def start(self, ms: int | str = 0) -> None:
        self._timer.start(delay(ms))

    def stop(self) -> None:
        self._timer.stop()

    def isActive(self) -> bool:  # noqa: N802 - QTimer's name, for callers written for one
        return self._timer.isActive()

    @property
    def timeout(self):
        """The timer's signal (a test follows the ticks)."""
        return self._timer.timeout


def run_until(done: Callable[[], bool], every_ms: int, timeout_ms: int) -> bool:
    """Run the event loop until ``done()`` (polled every ``every_ms``) or ``timeout_ms``; True when
    done. Timer objects, not singleShot: none is left pending once this returns."""
    from PySide6.QtCore import QEventLoop

    loop, finished = QEventLoop(), [False]
    poll, deadline = QTimer(), QTimer()

    def check() -> None:
        if done():
            finished[0] = True
            loop.quit()

    poll.timeout.connect(check)
    deadline.setSingleShot(True)
    deadline.timeout.connect(loop.quit)
    poll.start(every_ms)
    deadline.start(timeout_ms)
    loop.exec()
    poll.stop()
    deadline.stop()
    return finished[0]
