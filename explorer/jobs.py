"""Reads the GUI needs, answered off the GUI thread: the latest ask of each kind wins.

A view that needs numbers from a trace (a comparison of two runs, ...) asks here with a plain
function of the traces; the function runs on one background thread and its value (plain numpy,
images) is handed to the view's callback on the GUI thread. An answer to an ask that a newer ask
of the same kind has replaced is dropped, never shown. Tests (and screenshots) wait for the
answers with :meth:`ReadJobs.wait_until_idle`, as napari's slicer does, instead of polling.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from PySide6.QtCore import QCoreApplication, QObject, Signal

from models.config import InputError

Deliver = Callable[[object], None]


class ReadJobs(QObject):
    """``ask(kind, compute, deliver)``: ``compute()`` on the read thread, ``deliver(value)`` on this one."""

    _answered = Signal(str, int, object, object)  # kind, ticket, value, exception (or None)
    failed = Signal(str, str)  # kind, one-line message: a read that raised (shown in the status bar)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-reads")
        self._lock = threading.Lock()
        self._latest: dict[str, int] = {}  # kind -> ticket of the newest ask
        self._callbacks: dict[str, Deliver] = {}
        self._pending = 0  # asks not answered on this thread yet
        self._tickets = 0
        # Emitted on the read thread, delivered queued on the thread this object lives on (the GUI's).
        self._answered.connect(self._deliver)

    def ask(self, kind: str, compute: Callable[[], object], deliver: Deliver) -> int:
        """Run ``compute`` off this thread; ``deliver`` its value here unless a newer ``kind`` ask came."""
        with self._lock:
            self._tickets += 1
            ticket = self._tickets
            self._latest[kind] = ticket
            self._callbacks[kind] = deliver
            self._pending += 1
        self._pool.submit(self._run, kind, ticket, compute)
        return ticket

    def cancel(self, kind: str) -> None:
        """Forget the asks of ``kind`` (their answers are dropped when they come)."""
        with self._lock:
            self._latest[kind] = -1

    @property
    def idle(self) -> bool:
        return self._pending == 0

    def wait_until_idle(self, timeout: float = 10.0) -> bool:
        """Process events until every ask has been answered (or ``timeout`` seconds); True when idle."""
        deadline = time.monotonic() + timeout
        while not self.idle and time.monotonic() < deadline:
            QCoreApplication.processEvents()
            time.sleep(0.001)
        return self.idle

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    # --- the read thread -----------------------------------------------------------------------
    def _run(self, kind: str, ticket: int, compute: Callable[[], object]) -> None:
        if self._latest.get(kind) != ticket:  # replaced before it started: no work at all
            self._answered.emit(kind, ticket, None, None)
            return
        try:
            value, error = compute(), None
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message on the GUI thread
            value, error = None, exc
        self._answered.emit(kind, ticket, value, error)

    # --- back on the GUI thread ----------------------------------------------------------------
    def _deliver(self, kind: str, ticket: int, value: object, error: object) -> None:
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
