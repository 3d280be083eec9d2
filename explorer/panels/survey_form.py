"""The whole-model window's top row: the source line, then what every thumbnail and metric reads
("Show:"), "Leave out special tokens" and "Scale without token 0".

The controls follow the survey pane (``ExplorerState.survey.form``, a :class:`~explorer.panes.SurveyForm`)
and write each change to it, as Generate's form (explorer/panels/generate_form.py): a change made in
code shows in the controls, a change made in the controls comes with the pane's ``form_changed``, and
a survey reads the pane, never the controls. The source line shows the pane's ``status``.
"""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QWidget
from superqt.utils import signals_blocked

from explorer.panes import SurveyForm, SurveyPane

MEASURES = ("weights", "weighted norms")  # SurveyForm.measure
TABS = ("metrics", "rollout")  # SurveyForm.tab: the tab in front


class SurveyFormBar(QWidget):
    """One row: the source line (the pane's status), Show (the measure) and the two toggles."""

    def __init__(self, pane: SurveyPane, parent: QWidget | None = None):
        super().__init__(parent)
        self.pane = pane
        self.source_label = QLabel(pane.status)
        self.special_box = QCheckBox("Leave out special tokens")
        self.special_box.setToolTip("Drop [CLS], [SEP], <s>, </s>, <|endoftext|> (and a decoder's first token) "
                                    "from the thumbnails, the metrics and the rollout")  # fmt: skip
        self.sink_box = QCheckBox("Scale without token 0")
        self.sink_box.setToolTip("Leave the first key out of each thumbnail's colour scale: heads that park "
                                 "weight on the first token (attention sinks) stop flattening the rest")  # fmt: skip
        self.measure_combo = QComboBox()  # issue 22: what every thumbnail and metric reads
        self.measure_combo.addItems(list(MEASURES))
        self.measure_combo.setToolTip("Weights a, or the weighted norms ‖a_ij f_h(x_j)‖ (Kobayashi et al., "
                                      "2020): what each key really moves; rows as shares of their sum for "
                                      "the metrics")  # fmt: skip
        self.measure_combo.setEnabled(False)  # a model survey only (an attention file has no values)
        top = QHBoxLayout(self)
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.source_label, 1)
        top.addWidget(QLabel("Show:"))
        top.addWidget(self.measure_combo)
        top.addWidget(self.special_box)
        top.addWidget(self.sink_box)
        self.sync(pane.form)
        self.special_box.toggled.connect(lambda on: pane.update_form(special_out=on))
        self.sink_box.toggled.connect(lambda on: pane.update_form(sink_out=on))
        self.measure_combo.currentTextChanged.connect(lambda text: pane.update_form(measure=text))

    def sync(self, form: SurveyForm) -> None:
        """Show ``form`` in the controls without echoing it back."""
        for box, on in ((self.special_box, form.special_out), (self.sink_box, form.sink_out)):
            if box.isChecked() != on:
                with signals_blocked(box):
                    box.setChecked(on)
        if self.measure_combo.currentText() != form.measure and form.measure in MEASURES:
            with signals_blocked(self.measure_combo):
                self.measure_combo.setCurrentText(form.measure)

    def show_status(self, text: str) -> None:
        self.source_label.setText(text)
