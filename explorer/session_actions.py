"""File → Save session… / Open session…: the inputs, stage, head, focused query, the painted
mask and the edits, in the session file of models/session.py (explorer/session_io.py does the
inputs). A bad file gives one line in the status bar and leaves the window as it was."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QFileDialog

from models.config import InputError
from models.session import Run, Session, load_session, save_session

from .mask_dock import as_rows
from .session_io import inputs_from_session, session_from_inputs

FILTER = "Attention Explorer session (*.zip)"


class SessionActions(QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window_, self.state = window, window.state
        menu = window.menuBar().actions()[0].menu()  # File
        quit_action = menu.actions()[-1]
        self.open_action = menu.addAction("Open session…", lambda: self.open_session())
        self.open_action.setShortcut(QKeySequence("Ctrl+O"))
        self.save_action = menu.addAction("Save session…", lambda: self.save_session())
        for action in (self.open_action, self.save_action):
            menu.insertAction(quit_action, action)
        menu.insertSeparator(quit_action)

    def ask_path(self, save: bool) -> str | None:
        """The file dialog (tests replace this method)."""
        if save:
            path, _ = QFileDialog.getSaveFileName(self.window_, "Save session", "session.zip", FILTER)
        else:
            path, _ = QFileDialog.getOpenFileName(self.window_, "Open session", "", FILTER)
        return path or None

    # --- saving ----------------------------------------------------------------------------
    def session(self) -> Session:
        state = self.state
        session = session_from_inputs(state.inputs, state.stage_name, state.head, state.query)
        run = session.run
        if not state.inputs.uses_model and state.inputs.mask == "custom":
            request = state.request()
            if request is not None and request.custom_mask is not None:
                run = Run({**run.options, "--mask": "custom"}, {**run.arrays, "mask": np.asarray(request.custom_mask)})
        return dataclasses.replace(session, run=run, edits=tuple(self.window_.experiment.edits))

    def save_session(self, path: str | None = None) -> bool:
        path = path or self.ask_path(save=True)
        if not path:
            return False
        try:
            save_session(path, self.session())
        except InputError as exc:
            self.window_.status_line.show_error(str(exc))
            return False
        self.window_.status_line.show_info(f"saved session {Path(path).name}")
        return True

    # --- opening ---------------------------------------------------------------------------
    def open_session(self, path: str | None = None) -> bool:
        path = path or self.ask_path(save=False)
        if not path:
            return False
        try:
            session = load_session(path)
            run = session.run
            mask = run.arrays.get("mask") if run.options.get("--mask") == "custom" else None
            if mask is not None:  # a painted mask: the window shows it as one
                options = {k: v for k, v in run.options.items() if k != "--mask"}
                arrays = {k: v for k, v in run.arrays.items() if k != "mask"}
                run = Run(options, arrays)
            shown = inputs_from_session(dataclasses.replace(session, run=run, edits=()), self.state.inputs)
            if shown.stage is not None and not isinstance(shown.stage, str):
                raise InputError(f"session {path}: bad stage")
        except InputError as exc:
            self.window_.status_line.show_error(str(exc))
            return False
        inputs = shown.inputs
        if mask is not None:
            inputs = dataclasses.replace(inputs, mask="custom", painted_mask=as_rows(mask), mask_file="")
        else:
            inputs = dataclasses.replace(inputs, painted_mask=())
        if shown.not_applied:
            self.window_._notices.append(f"the window does not show yet: {', '.join(shown.not_applied)}")
        self.state.update_inputs(**{f.name: getattr(inputs, f.name) for f in dataclasses.fields(inputs)})
        self.window_.experiment.set_edits(session.edits)
        if shown.stage:
            self.state.set_stage(shown.stage)
        self.state.set_head(shown.head)
        self.state.set_query(shown.query)
        return True
