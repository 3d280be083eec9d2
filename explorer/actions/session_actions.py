"""File → Save session… / Open session…: everything on screen in the session file of
models/files/session.py. A session is a snapshot of the state (``state.snapshot()``: the inputs, edits and
Difference toggle of the shown run, the pinned run, the stage, head and focused query; the file
stores the RunSpecs that made the shown and the pinned run, explorer/files/session_io.py). Opening one is
``state.apply(snapshot)``: whole or not at all. A bad file gives one line in the status bar and leaves
the window as it was; so does a file read well whose run then fails (e.g. an edit outside the model's
layer, whose shapes are only known once it is traced): the state's snapshot from before is applied
again, pinned run included.

Opening a session with a pinned run computes that run first (the worker's usual path), pins it,
then shows the session's own run: the compare window shows both exactly as when it was saved.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog

from explorer.files.session_io import WindowSession, open_window_session, session_of
from explorer.panels.atlas_extras import corpus_notice
from explorer.snapshot import Snapshot
from explorer.state import NO_QUERY
from models.config import InputError
from models.files.session import Session, save_session

FILTER = "Attention Explorer session (*.zip)"


Report = Callable[[str], None]


class SessionActions(QObject):
    """Handed the state, ``submit()`` (send the state's request to the worker: its generation, or
    None), the status line's ``info`` / ``error`` and the window the dialogs belong to. The window
    calls :meth:`arrived` for every result shown and every failure."""

    def __init__(self, state, submit: Callable[[], int | None], info: Report, error: Report, parent=None,
                 atlas: Callable[[], dict | None] = lambda: None, off_gui: Callable | None = None):  # fmt: skip
        """``atlas()``: the corpus and checksum of the head atlas open beside the window, or None;
        ``off_gui(compute)``: where a session file is read (the window's jobs.call: another thread)."""
        super().__init__(parent)
        self._off_gui = off_gui or (lambda compute: compute())
        self._atlas = atlas
        self.state = state
        self._submit, self._info, self._error = submit, info, error
        self._parent = parent
        self._pending: tuple[int, WindowSession] | None = None  # (generation of the pinned run, the rest)
        self._opening = 0  # the generation of the session's own run, until it is shown or fails
        self._query = NO_QUERY  # the query the session being opened focuses on
        # What of the last session opened could not be shown as saved (its pinned run, its query), or
        # "": a notice in the window; the command line refuses it (``main.py --session``, issue 36).
        self.problem = ""

    def ask_path(self, save: bool) -> str | None:
        """The file dialog (tests replace this method)."""
        if save:
            path, _ = QFileDialog.getSaveFileName(self._parent, "Save session", "session.zip", FILTER)
        else:
            path, _ = QFileDialog.getOpenFileName(self._parent, "Open session", "", FILTER)
        return path or None

    # --- saving ---------------------------------------------------------------------------
    def session(self) -> Session:
        """What the window shows, as a session (before the first result: the state's own request;
        InputError when a file it uses cannot be read)."""
        display = self.state.display
        return session_of(self.state.snapshot(), display.request if display is not None else None, self._atlas())

    def save_session(self, path: str | None = None) -> bool:
        path = path or self.ask_path(save=True)
        if not path:
            return False
        try:
            save_session(path, self.session())
        except InputError as exc:
            self._error(str(exc))
            return False
        self._info(f"saved session {Path(path).name}")
        return True

    # --- opening ---------------------------------------------------------------------------
    def open_session(self, path: str | None = None) -> bool:
        path = path or self.ask_path(save=False)
        if not path:
            return False
        try:
            inputs = self.state.inputs
            shown = self._off_gui(lambda: open_window_session(path, inputs))
        except InputError as exc:
            self._error(str(exc))
            return False
        self.restore(shown)
        return True

    def restore(self, shown: WindowSession) -> None:
        """Show ``shown``: its pinned run first (computed on the worker, then pinned), then its run."""
        state = self.state
        if shown.not_applied:
            state.add_notice(f"the window does not show: {', '.join(shown.not_applied)}")
        if shown.atlas is not None:
            state.add_notice(corpus_notice(shown.atlas))
        state.set_restore_point(state.snapshot())  # what the window goes back to if the session fails
        self._pending = None
        self.problem, self._query = "", shown.query
        if shown.pinned is None:
            self._show(shown, None)
            return
        if not self._apply(shown.pinned.snapshot(state.restore_point)):  # its run, nothing pinned yet
            return
        generation = self._submit()
        if generation is None:  # its settings are not valid here: nothing to pin
            self._not_shown(f"the session's pinned run could not be computed: {state.problem[0]}")
            self._show(shown, None)
            return
        self._pending = (generation, shown)

    def arrived(self, generation: int, message: str = "") -> None:
        """A result (or a failure) came: when it is the pinned run's, pin it and show the session's run;
        when the session's own run failed, go back to what the window showed before."""
        if self._opening and generation >= self._opening:
            opening, self._opening = self._opening, 0
            if generation == opening and message:
                self._roll_back(message)
            elif generation == opening:
                self._check_query()
            self.state.set_restore_point(None)
            return
        if self._pending is None or generation < self._pending[0]:
            return
        wanted, shown = self._pending
        self._pending = None
        pinned = None
        if generation == wanted and not message:
            pinned = self.state.display  # the pinned run, just shown
        elif generation == wanted:
            self._not_shown(f"the session's pinned run could not be computed: {message}")
        else:  # another request went first (the user changed something meanwhile)
            self.state.add_notice("the session's pinned run was replaced before it was computed: not pinned")
        self._show(shown, pinned)

    def _show(self, shown: WindowSession, pinned) -> None:
        if self._apply(shown.snapshot(pinned)):
            self._opening = self._submit() or 0

    def _not_shown(self, problem: str) -> None:
        self.problem = problem
        self.state.add_notice(problem)

    def _check_query(self) -> None:
        """The session's query, said when its run has no such row (the state has focused another)."""
        n = len(self.state.display.trace.query_tokens) if self.state.display is not None else 0
        if self._query != NO_QUERY and not 0 <= self._query < n:
            self._not_shown(f"the session's query {self._query} is outside the run's {n} queries (0..{n - 1})")

    def _apply(self, snapshot: Snapshot) -> bool:
        """Apply a snapshot of the session; when the state refuses it, go back to the one before."""
        try:
            self.state.apply(snapshot)
        except (TypeError, ValueError) as exc:
            self._roll_back(str(exc))
            return False
        return True

    def _roll_back(self, message: str) -> None:
        before = self.state.restore_point
        self.state.set_restore_point(None)
        if before is None:
            return
        self.state.apply(before)  # the state's own snapshot: always applies
        self._submit()
        self.state.add_notice(f"the session was not opened ({message}); the window is as it was")
