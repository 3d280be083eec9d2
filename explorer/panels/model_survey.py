"""File → Whole model: the survey window of the current model and sentence (three rows of blocks for an
encoder-decoder model). Kept apart from the panels it opens, so that neither imports the other."""

from __future__ import annotations

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
    mask = None if inputs.model_mask == DEFAULT_MASK else inputs.model_mask
    window.panel.compute(lambda: models.model(inputs.model), inputs.sentence, mask=mask)
    window.show()
    return window
