"""File → Save session… / Open session…: everything on screen in the session file of
models/session.py (explorer/session_io.py maps it to the window's inputs): the RunSpec of the shown
run (its files' arrays, the painted mask, the edits and the Difference toggle inside) and of the
pinned run, the stage, head and focused query. A bad file gives one line in the status bar and
leaves the window as it was; so does a file read well whose run then fails (e.g. an edit outside
the model's layer, whose shapes are only known once it is traced): the window goes back to what
it showed before, pinned run included.

Opening a session with a pinned run computes that run first (the worker's usual path), pins it,
then shows the session's own run: the compare window shows both exactly as when it was saved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog

from models.config import InputError
from models.runspec import RunSpec
from models.session import Session, save_session

from .atlas_window import corpus_notice
from .session_io import WindowRun, WindowSession, open_window_session, spec_to_save

FILTER = "Attention Explorer session (*.zip)"


@dataclasses.dataclass(frozen=True)
class _Before:
    """What the window showed before a session was opened (to go back to when it fails)."""

    run: WindowRun
    stage: str | None
    head: int
    query: int
    pinned: object  # the pinned DisplayTrace, or None


Report = Callable[[str], None]


class SessionActions(QObject):
    """Handed the state, the experiment (edits), the compare actions (the pinned run), ``submit()``
    (send the current inputs to the worker: their generation, or None), ``notify`` (a notice with the
    next summary), the status line's ``info`` / ``error`` and the window the dialogs belong to. The
    window calls :meth:`arrived` for every result shown and every failure."""

    def __init__(self, state, experiment, compare, submit: Callable[[], int | None], notify: Report,
                 info: Report, error: Report, parent=None,
                 atlas: Callable[[], dict | None] = lambda: None):  # fmt: skip
        """``atlas()``: the corpus and checksum of the head atlas open beside the window, or None."""
        super().__init__(parent)
        self._atlas = atlas
        self.state, self.experiment, self.compare = state, experiment, compare
        self._submit, self._notify, self._info, self._error = submit, notify, info, error
        self._parent = parent
        self._pending: tuple[int, WindowSession] | None = None  # (generation of the pinned run, the rest)
        self._before: _Before | None = None  # what the window showed before the session being opened
        self._opening = 0  # the generation of the session's own run, until it is shown or fails

    def ask_path(self, save: bool) -> str | None:
        """The file dialog (tests replace this method)."""
        if save:
            path, _ = QFileDialog.getSaveFileName(self._parent, "Save session", "session.zip", FILTER)
        else:
            path, _ = QFileDialog.getOpenFileName(self._parent, "Open session", "", FILTER)
        return path or None

    # --- saving ----------------------------------------------------------------------------
    def session(self) -> Session:
        """What the window shows, as a session: the RunSpecs that made the shown and the pinned run
        (before the first result: the inputs' own, InputError when a file they use cannot be read)."""
        state = self.state
        shown = state.display.request if state.display is not None else None
        if not isinstance(shown, RunSpec):
            shown = self.experiment.wrap(state.inputs.to_runspec())
        pinned = self.compare.pinned
        pinned_spec = pinned.request if pinned is not None and isinstance(pinned.request, RunSpec) else None
        return Session(spec_to_save(shown), state.stage_name, state.head, state.query,
                       None if pinned_spec is None else spec_to_save(pinned_spec), self._atlas())  # fmt: skip

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
            shown = open_window_session(path, self.state.inputs)
        except InputError as exc:
            self._error(str(exc))
            return False
        self.restore(shown)
        return True

    def restore(self, shown: WindowSession) -> None:
        """Show ``shown``: its pinned run first (computed on the worker, then pinned), then its run."""
        if shown.not_applied:
            self._notify(f"the window does not show: {', '.join(shown.not_applied)}")
        if shown.atlas is not None:
            self._notify(corpus_notice(shown.atlas))
        experiment, compare = self.experiment, self.compare
        self._before = _Before(WindowRun(self.state.inputs, tuple(experiment.edits), experiment.difference.isChecked()),
                               self.state.stage_name, self.state.head, self.state.query, compare.pinned)  # fmt: skip
        compare.unpin()
        self._pending = None
        if shown.pinned is None:
            self._show(shown)
            return
        self._apply(shown.pinned)
        generation = self._submit()
        if generation is None:  # its settings are not valid here: nothing to pin
            self._notify("the pinned run could not be computed")
            self._show(shown)
            return
        self._pending = (generation, shown)

    def arrived(self, generation: int, message: str = "") -> None:
        """A result (or a failure) came: when it is the pinned run's, pin it and show the session's run;
        when the session's own run failed, go back to what the window showed before."""
        if self._opening and generation >= self._opening:
            failed, self._opening = generation == self._opening and bool(message), 0
            if failed:
                self._roll_back(message)
            self._before = None
            return
        if self._pending is None or generation < self._pending[0]:
            return
        wanted, shown = self._pending
        self._pending = None
        if generation == wanted and not message:
            self.compare.pin()
        elif generation == wanted:
            self._notify(f"the pinned run could not be computed: {message}")
        else:  # another request went first (the user changed something meanwhile)
            self._notify("the session's pinned run was replaced before it was computed: not pinned")
        self._show(shown)

    def _show(self, shown: WindowSession) -> None:
        self._apply(WindowRun(shown.inputs, shown.edits, shown.difference))
        if shown.stage:
            self.state.set_stage(shown.stage)
        self.state.set_head(shown.head)
        self.state.set_query(shown.query)
        self._opening = self._submit() or 0

    def _roll_back(self, message: str) -> None:
        before, self._before = self._before, None
        if before is None:
            return
        self._apply(before.run)
        if before.stage:
            self.state.set_stage(before.stage)
        self.state.set_head(before.head)
        self.state.set_query(before.query)
        if before.pinned is not None:
            self.compare.keep_pinned(before.pinned)
        self._submit()
        self._notify(f"the session was not opened ({message}); the window is as it was")

    def _apply(self, run: WindowRun) -> None:
        """Set the inputs, the Difference toggle and the edits of ``run`` (one request follows)."""
        experiment = self.experiment
        experiment.drop_edits()  # replaced below, not "cleared by the inputs"
        inputs = run.inputs
        self.state.update_inputs(**{f.name: getattr(inputs, f.name) for f in dataclasses.fields(inputs)})
        experiment.set_difference(run.difference)
        experiment.set_edits(run.edits)
