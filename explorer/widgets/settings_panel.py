"""Heads, sizes, mask, score function, positional encoding, temperature, seed, device.

An invalid combination (d_model not divisible by the heads while d_k is auto, ...) is refused
here: the offending boxes turn red and the reason appears under them; nothing is computed
until it is fixed. The state decides what is valid (AttentionConfig.validate); this only shows it.
"""

from __future__ import annotations

import random

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QWidget,
)
from superqt.utils import signals_blocked

from explorer.limits import MASK_CHOICES, MAX_D_MODEL, MAX_HEAD_DIM, MAX_HEADS, MAX_SEED, TEMPERATURE_RANGE

from .pad_picker import PadPicker

AUTO = 0  # spin-box value shown as "auto" for d_k / d_v
SCORES = {
    "dot": "dot  q·k",
    "scaled": "scaled  q·k / √d_k",
    "additive": "additive  wᵀtanh(qW₁ + kW₂)",
    "general": "general  q W kᵀ",
}


def _spin(low: int, high: int, tip: str, auto: bool = False) -> QSpinBox:
    box = QSpinBox()
    box.setRange(AUTO if auto else low, high)
    box.setToolTip(tip)
    if auto:
        box.setSpecialValueText("auto")
    return box


class SettingsPanel(QGroupBox):
    """Given the state (duck-typed), it writes settings into it and shows its validation."""

    def __init__(self, state, device_label: str, parent: QWidget | None = None):
        super().__init__("Settings", parent)
        self.state = state
        self.heads = _spin(1, MAX_HEADS, "Number of attention heads h")
        self.d_model = _spin(1, MAX_D_MODEL, "Width of each token's embedding")
        self.d_k = _spin(1, MAX_HEAD_DIM, "Query/key width per head; auto = d_model / h", auto=True)
        self.d_v = _spin(1, MAX_HEAD_DIM, "Value width per head; auto = d_k", auto=True)
        self.problem = QLabel()
        self.problem.setObjectName("problem")
        self.problem.setWordWrap(True)
        self.problem.hide()
        self.mask = QComboBox()
        self.mask.addItems(MASK_CHOICES)
        self.mask.setToolTip("causal: no peeking at later tokens; padding: hide the keys you tick below")
        self.pad_picker = PadPicker()
        self.score = QComboBox()
        for key, label in SCORES.items():
            self.score.addItem(label, key)
        self.pe = QCheckBox("sinusoidal (X + P)")
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(*TEMPERATURE_RANGE)
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.temperature.setToolTip("softmax(S / T): below 1 sharpens the weights, above 1 flattens them")
        self.seed = _spin(0, MAX_SEED, "Seed of the random embeddings and projection weights")
        self.new_seed = QPushButton("New seed")
        self.device = QLabel(device_label)
        self.device.setObjectName("device")

        self._tips = {n: getattr(self, n).toolTip() for n in ("heads", "d_model", "d_k", "d_v", "temperature")}
        seed_row = QHBoxLayout()
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(self.new_seed)
        form = QFormLayout(self)
        form.addRow("Heads h", self.heads)
        form.addRow("d_model", self.d_model)
        form.addRow("d_k", self.d_k)
        form.addRow("d_v", self.d_v)
        form.addRow(self.problem)
        form.addRow("Mask", self.mask)
        form.addRow(self.pad_picker)
        form.addRow("Score", self.score)
        form.addRow("Positions", self.pe)
        form.addRow("Temperature", self.temperature)
        form.addRow("Seed", seed_row)
        form.addRow("Device", self.device)

        self.heads.valueChanged.connect(lambda v: state.update_inputs(heads=v))
        self.d_model.valueChanged.connect(lambda v: state.update_inputs(d_model=v))
        self.d_k.valueChanged.connect(lambda v: state.update_inputs(d_k=v or None))
        self.d_v.valueChanged.connect(lambda v: state.update_inputs(d_v=v or None))
        self.mask.currentTextChanged.connect(lambda m: state.update_inputs(mask=m))
        self.pad_picker.positions_changed.connect(lambda p: state.update_inputs(pad_positions=p))
        self.score.currentIndexChanged.connect(lambda i: state.update_inputs(score=self.score.itemData(i)))
        self.pe.toggled.connect(lambda on: state.update_inputs(pe=on))
        self.temperature.valueChanged.connect(lambda t: state.update_inputs(temperature=round(t, 2)))
        self.seed.valueChanged.connect(lambda s: state.update_inputs(seed=s))
        self.new_seed.clicked.connect(lambda: self.seed.setValue(random.randint(0, MAX_SEED)))
        state.inputs_changed.connect(self.sync)
        state.key_tokens_changed.connect(lambda _tokens: self.sync(state.inputs))
        state.settings_error_changed.connect(self.show_problem)
        self.sync(state.inputs)
        self.show_problem(state.settings_error, ())

    def sync(self, inputs) -> None:
        """Show ``inputs`` in the controls without echoing changes back to the state."""
        values = (
            (self.heads, inputs.heads), (self.d_model, inputs.d_model), (self.d_k, inputs.d_k or AUTO),
            (self.d_v, inputs.d_v or AUTO), (self.seed, inputs.seed), (self.temperature, inputs.temperature),
        )  # fmt: skip
        for box, value in values:
            if box.value() != value:
                with signals_blocked(box):
                    box.setValue(value)
        with signals_blocked(self.mask), signals_blocked(self.score), signals_blocked(self.pe):
            self.mask.setCurrentText(inputs.mask)
            self.score.setCurrentIndex(max(0, self.score.findData(inputs.score)))
            self.pe.setChecked(inputs.pe)
        self.pad_picker.setVisible(inputs.mask == "padding")
        if inputs.mask == "padding":
            self.pad_picker.set_tokens(self.state.key_tokens, inputs.pad_positions)

    def show_problem(self, message: str, fields: tuple[str, ...]) -> None:
        self.problem.setText(f"⚠ {message}" if message else "")
        self.problem.setVisible(bool(message))
        for name in ("heads", "d_model", "d_k", "d_v", "temperature"):
            box = getattr(self, name)
            bad = name in fields
            box.setProperty("invalid", bad)
            box.setToolTip(message if bad else self._tips[name])
            box.style().unpolish(box)  # re-apply the style sheet's [invalid="true"] rule
            box.style().polish(box)
