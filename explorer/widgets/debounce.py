"""A call made once after a burst of calls: superqt's ``qdebounced``, plus whether one is waiting.

``qdebounced`` gives ``flush()`` and ``cancel()`` but no public "is a call waiting?" (its timer keeps
running after the call, so the timer cannot tell): :attr:`Debounced.pending` answers that, for
``is_typing()`` and ``is_settled()``.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from superqt.utils import qdebounced


class Debounced:
    """``func(*args)`` called ``ms`` milliseconds after the last call (with its arguments), once."""

    def __init__(self, func: Callable[..., object], ms: int, parent: QObject):
        self._func = func
        self._pending = False
        self._call = qdebounced(self._run, timeout=ms, parent=parent)

    def __call__(self, *args) -> None:
        self._pending = True
        self._call(*args)

    @property
    def pending(self) -> bool:
        """True from a call until ``func`` has run (or the call was cancelled)."""
        return self._pending

    def flush(self) -> None:
        """Run a waiting call now."""
        if self._pending:
            self._call.flush(restart_timer=False)

    def cancel(self) -> None:
        """Forget a waiting call."""
        self._pending = False
        self._call.cancel()

    def _run(self, *args) -> None:
        self._pending = False
        self._func(*args)
