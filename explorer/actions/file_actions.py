"""File → Open embeddings… / Open weights… / Open mask…: what `main.py export` takes as
--embeddings (+ --labels), --weights and --mask custom --mask-file, for the toy engine.

A file is checked before anything changes: the RunSpec of a copy of the inputs
(Inputs.to_runspec, which reads the file) goes through the one validator `export` runs
(RunSpec.validate: shapes, widths, lengths, finite values; no torch), so a bad file gives export's
one-line message in the status bar and the view stays as it was. The file is read and checked off
the GUI thread (``off_gui``: the window's executor; the window keeps painting meanwhile), tested by
tests/explorer/test_gui_thread_never_computes.py. What only computing can find is said by the
worker, as for any other run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QInputDialog

from explorer.inputs import FILE_ROLES
from models.config import InputError
from models.engine.held_arrays import HeldArrays
from models.files.run_files import load_matrix

NPY = "NumPy array (*.npy)"
NPZ = "Weights archive (*.npz)"
TEXT = "Text (*.txt *.md);;Any file (*)"


class FileActions(QObject):
    """Handed the state, ``notify`` (a notice shown with the next summary), the status line's ``error``
    and the window the dialogs belong to; the File menu's entries (explorer.actions) call it."""

    def __init__(self, state, notify: Callable[[str], None], error: Callable[[str], None], parent=None,
                 off_gui: Callable[[Callable[[], object]], object] | None = None):  # fmt: skip
        super().__init__(parent)
        self.state, self._notify, self._error, self._parent = state, notify, error, parent
        # Where files are read and checked: another thread's (the window's jobs.call), waited for.
        self._off_gui = off_gui or (lambda compute: compute())

    # --- dialogs (tests replace these) -----------------------------------------------------
    def ask_path(self, caption: str, name_filter: str) -> str | None:
        path, _ = QFileDialog.getOpenFileName(self._parent, caption, "", name_filter)
        return path or None

    def ask_labels(self, rows: int) -> str | None:
        """Comma-separated labels for the rows, "" for #0, #1, … (None: cancelled)."""
        text, ok = QInputDialog.getText(self._parent, "Token labels (optional)",
                                        f"{rows} comma-separated labels, or leave empty for #0, #1, …:")  # fmt: skip
        return text if ok else None

    # --- actions ---------------------------------------------------------------------------
    def open_embeddings(self, path: str | None = None) -> bool:
        path = path or self.ask_path("Open embeddings (n × d_model)", NPY)
        if not path:
            return False
        try:
            matrix = self._off_gui(lambda: load_matrix(path, "embeddings"))
        except InputError as exc:
            return self._refuse(exc)
        changes = {"embeddings_file": path, "labels": (), "held": self.state.inputs.held.without("embeddings")}
        if matrix.ndim == 2 and matrix.shape[1] != self.state.inputs.d_model:
            changes["d_model"] = int(matrix.shape[1])  # the file sets the width, as the model's would
        text = self.ask_labels(matrix.shape[0] if matrix.ndim else 0)
        if text is None:
            return False
        if text.strip():
            changes["labels"] = tuple(p.strip() for p in text.split(","))
        return self._apply(changes, f"embeddings {path}")

    def open_weights(self, path: str | None = None) -> bool:
        path = path or self.ask_path("Open projection weights", NPZ)
        held = self.state.inputs.held.without("weights")  # a session's weights give way to the file
        return bool(path) and self._apply({"weights_file": path, "held": held}, f"weights {path}")

    def open_mask(self, path: str | None = None) -> bool:
        path = path or self.ask_path("Open mask (boolean, True = hidden)", NPY)
        return bool(path) and self._apply({"mask": "custom", "mask_file": path}, f"mask {path}")

    def close_files(self) -> None:
        inputs = self.state.inputs
        mask = "none" if inputs.mask_file else inputs.mask
        self.state.update_inputs(embeddings_file="", labels=(), weights_file="", mask_file="", mask=mask,
                                 held=HeldArrays())  # also what a session brought

    # --- helpers ---------------------------------------------------------------------------
    def open_text(self, path: str | None = None) -> bool:
        """A long text as the sentence (up to 131,072 tokens: the toy's or a model's); its words
        become the tokens, as typed ones would."""
        from models.io.text_file import read_text_file

        path = path or self.ask_path("Open text (UTF-8): its words become the tokens", TEXT)
        if not path:
            return False
        try:
            text = read_text_file(path)
        except InputError as exc:
            return self._refuse(exc)
        self.state.update_inputs(sentence=text)
        self._notify(f"opened text {path} ({len(text.split()):,} words)")
        return True

    def _apply(self, changes: dict, what: str) -> bool:
        inputs = self.state.inputs
        if inputs.uses_model:
            return self._refuse(InputError("files apply to the toy model; choose it in the model list first"))
        def read_and_check():  # off the GUI thread: the file is read now, once (the requests after hold it)
            candidate = dataclasses.replace(inputs, **changes).with_files_read(tuple(set(changes) & set(FILE_ROLES)))
            candidate.config().validate()
            candidate.to_runspec().validate()  # export's checks: shapes, widths, finite values
            return candidate

        try:
            candidate = self._off_gui(read_and_check)
        except InputError as exc:
            return self._refuse(exc)
        self.state.update_inputs(**changes | {"held": candidate.held})
        self._notify(f"opened {what}")
        return True

    def _refuse(self, exc: InputError) -> bool:
        self._error(str(exc))
        return False
