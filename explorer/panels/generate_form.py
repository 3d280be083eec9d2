"""The Generate window's form: the decoder, the prompt, how many tokens, the sampling settings.

The controls follow the state's Generate pane (``ExplorerState.generate.form``, a
:class:`~explorer.panes.GenerateForm`) and write each change to it, as the main window's settings
follow ``ExplorerState.inputs``: a change made in code shows in the controls, a change typed in the
controls comes with the pane's ``form_changed``, and a generation reads the pane, never the controls.
"""

from __future__ import annotations

from types import SimpleNamespace

from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QWidget
from superqt.utils import signals_blocked

from explorer.panes import GenerateForm, GeneratePane
from models.command_fields import NEW_TOKENS
from models.generate import GenerateSettings


def spin(lo: int, hi: int, value: int, tip: str, special: str | None = None) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setValue(value)
    box.setToolTip(tip)
    if special:
        box.setSpecialValueText(special)
    return box


def settings_of(form: GenerateForm) -> GenerateSettings:
    """The generation settings the form asks for (top-k and top-p only when sampling); InputError when invalid."""
    sampling = form.temperature > 0
    return GenerateSettings.from_rows(SimpleNamespace(
        max_new_tokens=form.new_tokens, temperature=float(form.temperature),
        top_k=(form.top_k or None) if sampling else None,
        top_p=(form.top_p if form.top_p < 1 else None) if sampling else None,
        seed=form.seed,
    ))  # generate's rows, checked as main.py generate checks them  # fmt: skip


class GenerateFormBar(QWidget):
    """One row: Model, Prompt, New tokens, Temperature, Top-k, Top-p, Seed and the Generate button."""

    def __init__(self, pane: GeneratePane, parent: QWidget | None = None):
        super().__init__(parent)
        self.pane = pane
        self.model_edit = QLineEdit()
        self.model_edit.setToolTip("A decoder: a folder, a cached name")
        self.prompt_edit = QLineEdit()
        self.new_tokens = spin(NEW_TOKENS.low, NEW_TOKENS.high, NEW_TOKENS.default, "How many tokens to generate "
                               "(fewer if an end token comes)")  # generate's --max-new-tokens row  # fmt: skip
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 10.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setSpecialValueText("greedy")
        self.temperature.setToolTip("0: greedy (the most likely token); above 0: sample")
        self.top_k = spin(0, 100000, 0, "Sampling: keep the k most likely tokens", "off")
        self.top_p = QDoubleSpinBox()
        self.top_p.setRange(0.0, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_p.setToolTip("Sampling: keep the most likely tokens up to this probability mass (1: off)")
        self.seed = spin(0, 2**31 - 1, 0, "Sampling: the seed (same seed, same tokens)")
        self.go = QPushButton("Generate")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for label, widget in (("Model", self.model_edit), ("Prompt", self.prompt_edit)):
            layout.addWidget(QLabel(label))
            layout.addWidget(widget, 2 if widget is self.prompt_edit else 1)
        for label, widget in (("New tokens", self.new_tokens), ("Temperature", self.temperature),
                              ("Top-k", self.top_k), ("Top-p", self.top_p), ("Seed", self.seed)):  # fmt: skip
            layout.addWidget(QLabel(label))
            layout.addWidget(widget)
        layout.addWidget(self.go)
        self.sync(pane.form)
        self.model_edit.textChanged.connect(lambda text: pane.update_form(model=text))
        self.prompt_edit.textChanged.connect(lambda text: pane.update_form(prompt=text))
        self.new_tokens.valueChanged.connect(lambda n: pane.update_form(new_tokens=n))
        self.temperature.valueChanged.connect(lambda t: pane.update_form(temperature=round(t, 2)))
        self.top_k.valueChanged.connect(lambda k: pane.update_form(top_k=k))
        self.top_p.valueChanged.connect(lambda p: pane.update_form(top_p=round(p, 2)))
        self.seed.valueChanged.connect(lambda s: pane.update_form(seed=s))
        pane.form_changed.connect(self.sync)

    def sync(self, form: GenerateForm) -> None:
        """Show ``form`` in the controls without echoing it back (a control already showing its value
        is left alone: the cursor of the field being typed in stays where it is)."""
        for edit, text in ((self.model_edit, form.model), (self.prompt_edit, form.prompt)):
            if edit.text() != text:
                with signals_blocked(edit):
                    edit.setText(text)
        for box, value in ((self.new_tokens, form.new_tokens), (self.temperature, form.temperature),
                           (self.top_k, form.top_k), (self.top_p, form.top_p), (self.seed, form.seed)):  # fmt: skip
            if box.value() != value:
                with signals_blocked(box):
                    box.setValue(value)

    def disconnect_pane(self) -> None:
        """Stop following the pane (the window is closing; the pane lives on in the state)."""
        self.pane.form_changed.disconnect(self.sync)
