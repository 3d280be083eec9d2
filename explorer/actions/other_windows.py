"""The windows the main window opens beside itself (whole model, attention file, positional-encoding
lens, generation, head atlas, training timeline, time machine), each kept so that it can be closed with the app."""

from __future__ import annotations

from collections.abc import Callable

import shiboken6
from PySide6.QtWidgets import QWidget

from explorer.widgets.pe_lens import PeLens
from explorer.widgets.window_size import open_sized
from models.config import InputError
from models.reads.model_positions import ModelPositions, describe, model_positions


class OtherWindows:
    """``window.windows``: opens the other windows for the state's run and model. ``parent``: the
    main window (their Qt parent); ``models``: the worker's model source; ``error``/``submit``: the
    status line's error and the window's "trace now"."""

    def __init__(self, parent: QWidget, state, models, error: Callable[[str], None], submit: Callable[[], object],
                 off_gui: Callable | None = None):  # fmt: skip
        self.parent, self.state, self.models, self.error, self.submit = parent, state, models, error, submit
        self.off_gui = off_gui  # where the timeline's checkpoints are read (the window's jobs.call)
        self.pe_lens: PeLens | None = None
        self.survey = None  # the last whole-model or attention-file window
        self.generate = None
        self.atlas = None
        self.timeline = None
        self.timeline_error = ""  # why the last timeline did not open
        self.time_machine = None
        self._building = False  # a timeline's checkpoints being read (off the GUI thread)
        self.opened: list[QWidget] = []  # every window opened (two surveys may be open at once)

    def _kept(self, window):
        if window is not None and window not in self.opened:
            self.opened.append(window)
        return window

    def open_pe_lens(self) -> PeLens:
        """The positions of the run shown: a pretrained model's own (rotary angles, learned rows, or
        one sentence when it has none), else the sinusoidal encoding's columns, P Pᵀ and the
        relative-position property for this sentence's length and d_model."""
        display = self.state.display
        config = display.trace.config if display is not None else {}
        n = len(display.trace.key_tokens) if display is not None else 60
        d = int(config.get("d_model", 32))
        lens = self.pe_lens or PeLens()
        lens.setWindowTitle("Positional-encoding lens")
        if config.get("source") == "pretrained":
            self._model_positions(lens, config, max(n, 1))
        else:
            n = 60 if n < 2 else min(n, 512)
            lens.set_encoding(n, d)
            lens.set_about(what_the_lens_shows(config, n, d))
        if not lens.isVisible():  # open again: where the user left it
            open_sized(lens, 900, 700)
        lens.show()
        lens.raise_()
        self.pe_lens = self._kept(lens)
        return lens

    def _model_positions(self, lens: PeLens, config: dict, n: int) -> None:
        name = str(config.get("model", "this model"))
        try:
            spec = self.state.inputs.to_runspec()  # the run's model, device and --dtype: cached, never a second copy
            arch = self.models.model(spec.model, spec.device, spec.dtype).arch
        except Exception as exc:  # noqa: BLE001 - the lens says why rather than failing the window
            lens.set_model_positions(ModelPositions("none", n), name)
            lens.set_about(f"{name}: its positions could not be read ({exc}).")
            return
        mp = model_positions(arch, min(n, 512))
        lens.set_model_positions(mp, name)
        lens.set_about(describe(mp, name))

    def open_survey(self, path=None, model: bool = False):
        """The whole-model window: an attention file, or every layer of the current model."""
        from explorer.panels.model_survey import open_model_survey
        from explorer.panels.survey_panel import open_attention_window

        if model:
            survey = open_model_survey(self.parent, self.models, self.state, self.error)
        else:
            survey = open_attention_window(self.parent, path, self.state.survey)
        self.survey = self._kept(survey) or self.survey
        return survey

    def open_generate(self):
        from explorer.panels.generate_panel import open_generate_for

        self.generate = self._kept(open_generate_for(self.parent, self.models, self.state))
        return self.generate

    def open_timeline(self, step: str | None = None):
        """The training timeline of the model on screen (issue 20: explorer/actions/timeline_actions.py)."""
        from explorer.actions.timeline_actions import open_timeline

        return self._history_window("timeline", "no training timeline", lambda: open_timeline(
            self.state, self.submit, self.error, step=step, off_gui=self.off_gui))  # fmt: skip

    def open_time_machine(self, cell=None):
        """File → Time machine…: every head of the model on screen followed through its checkpoints."""
        from explorer.actions.time_machine_actions import open_time_machine

        return self._history_window("time_machine", "no time machine", lambda: open_time_machine(
            self.state, self.submit, cell=cell, off_gui=self.off_gui))  # fmt: skip

    def _history_window(self, attr: str, refused: str, make: Callable[[], QWidget]):
        """One window of a model's checkpoints at a time (``self.<attr>``), built by ``make`` while no
        other is being built (its checkpoints are read off the GUI thread and the window keeps answering);
        a model without a history is the status line's error (kept in ``timeline_error``)."""
        if self._building:
            return getattr(self, attr)
        if getattr(self, attr) is not None:
            getattr(self, attr).close()
            getattr(self, attr).deleteLater()
        self._building = True
        try:
            setattr(self, attr, self._kept(make()))
        except InputError as exc:
            setattr(self, attr, None)
            self.timeline_error = f"{refused}: {exc}"
            self.error(self.timeline_error)
        finally:
            self._building = False
        return getattr(self, attr)

    def open_atlas(self, folder=None, compare=None):
        """The head atlas window (explorer/panels/atlas_window.py), of this window's model."""
        from explorer.panels.atlas_window import open_atlas_window

        self.atlas = self._kept(open_atlas_window(self.parent, self.models, self.state))
        if folder is not None and self.atlas.panel.open_folder(folder) and compare is not None:
            self.atlas.panel.compare_folder(compare)
        return self.atlas

    def close_all(self) -> None:
        """Close every window opened and still there (a survey's or the atlas's worker thread stops
        on close)."""
        for other in self.opened:
            if shiboken6.isValid(other):
                other.close()
                other.deleteLater()
        self.opened.clear()


def what_the_lens_shows(config: dict, n: int, d: int) -> str:
    """One line above the lens: whether the shown run uses this encoding at all. The lens drew the
    notes' sinusoids "over 60 positions (d = 32)" for MiniLM (learned positions, d 384) and the
    induction model (rotary) without a word, and for the toy with its positions off."""
    pe = config.get("pe") or "none"
    if pe != "sinusoidal":
        return (f"Positions are off in this run (Positions unticked): its attention cannot tell word order. "
                f"Shown: the sinusoidal encoding ticking it would add, {n} positions × d = {d}.")
    return f"The encoding this run adds to X: P, {n} positions × d = {d}."
