"""Work left to a later event-loop turn, so that no turn of the GUI thread runs long (issue 7).

Qt delivers the events a turn posts (other panels' layout requests, paints, scene updates) in the
next turn, before any timer: a zero-delay call would share that turn with them. ``NextTurn`` posts
a call that then starts a 1 ms timer, so its slot runs in a turn of its own, after them.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

TURN_MS = 1


def after_this_turn(parent: QObject, slot) -> None:
    """Call ``slot`` in a turn of its own, after what the current turn posted."""
    QTimer.singleShot(0, parent, lambda: QTimer.singleShot(TURN_MS, parent, slot))


class NextTurn:
    """Run ``slot`` once in a later turn than the one that asks; asking again meanwhile coalesces.
    ``pending`` is True from the request until the slot has run; ``flush()`` runs it now."""

    def __init__(self, parent: QObject, slot):
        self._parent, self._slot = parent, slot
        self._timer = QTimer(parent)
        self._timer.setSingleShot(True)
        self._timer.setInterval(TURN_MS)
        self._timer.timeout.connect(self._run)
        self.pending = False

    def request(self) -> None:
        if not self.pending:
            self.pending = True
            QTimer.singleShot(0, self._parent, self._arm)

    def cancel(self) -> None:
        self.pending = False
        self._timer.stop()

    def flush(self) -> None:
        if self.pending:
            self._run()

    def _arm(self) -> None:
        if self.pending:  # not cancelled (or run by flush) since
            self._timer.start()

    def _run(self) -> None:
        self.cancel()
        self._slot()
