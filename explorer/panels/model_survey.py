"""File → Whole model: the survey window of the current model and sentence (three rows of blocks for an
encoder-decoder model). Kept apart from the panels it opens, so that neither imports the other."""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from explorer.panels.survey_panel import SurveyWindow
from explorer.widgets.window_size import bring_forward
from models.runspec import DEFAULT_MASK


def open_model_survey(parent: QWidget | None, models, state, show_error) -> SurveyWindow | None:
    """Every layer of the window's current model and sentence in a survey window; a click on a
    head opens that layer and head in the stepper. ``models``: the worker's PretrainedRunner
    (models load, or come from its cache, on the survey's own thread)."""
    inputs = state.inputs
    if not inputs.uses_model:
        show_error("the whole-model view needs a pretrained model: choose one first")
        return None
    if getattr(state.model_info, "encoder_decoder", False):  # three rows: encoder, decoder, cross
        from explorer.panels.encdec_survey_window import open_encdec_survey

        return open_encdec_survey(parent, models, state)
    window = SurveyWindow(parent, state.survey)  # its options and status lines: the state's survey pane

    def open_head(layer: int, head: int) -> None:
        state.update_inputs(layer=layer)
        state.set_head(head)
        bring_forward(parent)

    window.panel.head_chosen.connect(open_head)

    def survey(inputs) -> None:
        mask = None if inputs.model_mask == DEFAULT_MASK else inputs.model_mask
        window.panel.compute(lambda: models.model(inputs.model), inputs.sentence, mask=mask)

    survey(inputs)
    Following(window, state, survey)
    window.show()
    return window


class Following(QObject):
    """The whole-model window follows the main window: each trace of another model (a step of the
    training timeline), sentence or mask is surveyed again (docs/induction.md: every view follows).
    It kept showing step 2500 and "61 tokens" without a word. A closed window follows nothing; one
    whose model became an encoder-decoder (another kind of window) says it shows the last model."""

    def __init__(self, window, state, survey) -> None:
        super().__init__(window)  # deleted with the window: the connection goes with it
        self.window, self.state, self.survey = window, state, survey
        self.key = self._key(state.inputs)
        state.trace_changed.connect(self.follow)

    @staticmethod
    def _key(inputs) -> tuple:
        return (inputs.model, inputs.sentence, inputs.model_mask)

    def follow(self, _display) -> None:
        if not shiboken6.isValid(self.window) or not self.window.isVisible():
            return
        inputs = self.state.inputs
        if self._key(inputs) == self.key:
            return
        if not inputs.uses_model or getattr(self.state.model_info, "encoder_decoder", False):
            self.window.panel.pane.set_status(f"{self.window.panel.pane.status} (the model shown before; File → "
                                              f"Whole model… for this one)")  # fmt: skip
            self.key = self._key(inputs)
            return
        self.key = self._key(inputs)
        self.survey(inputs)
