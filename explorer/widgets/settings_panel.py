"""Heads, sizes, mask, score function, positional encoding, temperature, seed, device.

An invalid combination (d_model not divisible by the heads while d_k is auto, ...) is refused
here: the offending boxes turn red and the reason appears under them; nothing is computed
until it is fixed. The state decides what is valid (AttentionConfig.validate); this only shows it.

With a pretrained model the model sets the sizes, the score and the positions: those boxes show
the model's values (from the state's ``model_info``), disabled, and their tooltips say why. The
mask then offers the model's own mask plus none / causal / padding to compare.
"""

from __future__ import annotations

import random
from pathlib import Path

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

from explorer.widgets.pad_picker import PadPicker
from explorer.widgets.row_boxes import RowBox
from explorer.widgets.seed_box import SeedBox
from models.fields import BY_DEST, MODEL_MASKS

MASKS = BY_DEST["mask"].choices  # custom: painted, or the file given with --mask-file

MASK_WIDEST = 240  # px: the mask box's least width at most (a long mask file's name is elided past it)
AUTO = 0  # spin-box value shown as "auto" for d_k / d_v
SCORES = {
    "dot": "dot  q·k",
    "scaled": "scaled  q·k / √d_k",
    "additive": "additive  wᵀtanh(qW₁ + kW₂)",
    "general": "general  q W kᵀ",
}
SIZES = ("heads", "d_model", "d_k", "d_v", "temperature")  # the boxes a validation message can name
PE_TOY = "sinusoidal (X + P)"
PE_MODEL = {"learned": "learned (added to X)", "rotary": "rotary (rotates q, k)",
            "none": "none in this layer (NoPE)",
            "relative": "relative buckets (bias on scores)", "sinusoidal": "sinusoidal (added to X)"}  # fmt: skip
POSITIONS = {"rotary": "rotary position embeddings (RoPE)",
             "relative": "a learned bias per relative-distance bucket, added to the scores (T5); no scaling",
             "sinusoidal": "fixed sinusoidal positions, added to the embeddings (Marian)",
             "none": "no position information in this layer (NoPE)"}
LOADING = "set by the model (loading…)"
# The inputs with a control written for them (this panel, the sentence panel, the model chooser).
# Any other input its row saves (a new row of the option table) gets a box made from that row below
# these (explorer/widgets/row_boxes.py).
HAND_MADE = ("sentence", "cross_enabled", "cross_sentence", "model", "layer", "block", "model_mask", "heads",
             "d_model", "d_k", "d_v", "mask", "pad_positions", "score", "pe", "temperature", "seed",
             "dtype")  # fmt: skip

DTYPE_TIP = ("What the model's layers below the traced one (and generation) are held and run in: bfloat16 or "
             "float16 halve their memory; the traced layer is always float32")  # fmt: skip


def _spin(name: str, tip: str, auto: bool = False) -> QSpinBox:
    """A box offering what the option table's row ``name`` says the window shows."""
    low, high = BY_DEST[name].window_range
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
        self.heads = _spin("heads", "Number of attention heads h")
        self.d_model = _spin("d_model", "Width of each token's embedding")
        self.d_k = _spin("d_k", "Query/key width per head; auto = d_model / h", auto=True)
        self.d_v = _spin("d_v", "Value width per head; auto = d_k", auto=True)
        self.problem = QLabel()
        self.problem.setObjectName("problem")
        self.problem.setWordWrap(True)
        self.problem.hide()
        self.mask = QComboBox()
        self.mask.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)  # a model's longer names
        self._mask_mode: str | None = None  # "toy" or the model's default mask: what the items offer
        self.pad_picker = PadPicker()
        self.score = QComboBox()
        for key, label in SCORES.items():
            self.score.addItem(label, key)
        # Not as wide as its longest formula (additive): the column fits half a 1920 px screen
        self.score.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.score.setMinimumContentsLength(12)
        self.pe = QCheckBox(PE_TOY)
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(*BY_DEST["temperature"].window_range)
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.temperature.setToolTip("softmax(S / T): below 1 sharpens the weights, above 1 flattens them")
        self.seed = SeedBox(BY_DEST["seed"].window_range[1], "Seed of the random embeddings and projection weights")
        self.new_seed = QPushButton("New seed")
        self.device = QLabel(device_label)
        self.device.setObjectName("device")
        self.dtype = QComboBox()  # a model's layers below the traced one, and generation (--dtype)
        for name in BY_DEST["dtype"].choices:
            self.dtype.addItem(name, name)
        self.dtype.setToolTip(DTYPE_TIP)

        self._tips = {n: getattr(self, n).toolTip() for n in SIZES}
        self._toy_tips = {n: getattr(self, n).toolTip() for n in ("score", "pe", "seed")}
        self._toy_tips["new_seed"] = "Pick a random seed"
        self._model_tips: dict[str, str] = {}  # why each control is disabled, while a model is chosen
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
        self.row_boxes = {name: RowBox(row, lambda value, n=name: state.update_inputs(**{n: value}))
                          for name, row in type(state.inputs).rows.items()
                          if row is not None and name not in HAND_MADE}  # fmt: skip
        for box in self.row_boxes.values():
            form.addRow(box.label, box.widget)
        form.addRow("Device", self.device)
        form.addRow("Precision", self.dtype)

        self.heads.valueChanged.connect(lambda v: state.update_inputs(heads=v))
        self.d_model.valueChanged.connect(lambda v: state.update_inputs(d_model=v))
        self.d_k.valueChanged.connect(lambda v: state.update_inputs(d_k=v or None))
        self.d_v.valueChanged.connect(lambda v: state.update_inputs(d_v=v or None))
        self.mask.currentIndexChanged.connect(self._mask_picked)
        self.pad_picker.positions_changed.connect(lambda p: state.update_inputs(pad_positions=p))
        self.score.currentIndexChanged.connect(lambda i: state.update_inputs(score=self.score.itemData(i)))
        self.pe.toggled.connect(lambda on: state.update_inputs(pe=on))
        self.temperature.valueChanged.connect(lambda t: state.update_inputs(temperature=round(t, 2)))
        self.seed.valueChanged.connect(lambda s: state.update_inputs(seed=s))
        self.dtype.currentIndexChanged.connect(lambda i: state.update_inputs(dtype=self.dtype.itemData(i)))
        self.new_seed.clicked.connect(lambda: self.seed.setValue(random.randint(*BY_DEST["seed"].window_range)))
        state.inputs_changed.connect(self.sync)
        state.key_tokens_changed.connect(lambda _tokens: self.sync(state.inputs))
        state.model_info_changed.connect(lambda _info: self.sync(state.inputs))
        state.settings_error_changed.connect(self.show_problem)
        self.sync(state.inputs)

    def sync(self, inputs) -> None:
        """Show ``inputs`` in the controls without echoing changes back to the state."""
        info = self.state.model_info if inputs.uses_model else None
        self._sync_mask_items(inputs, info)
        if info is not None:  # the model's own sizes, for reading only
            heads, d_model, d_k, d_v, seed, temperature = info.heads, info.d_model, info.d_k, info.d_k, 0, 1.0
        else:
            heads, d_model, d_k, d_v = inputs.heads, inputs.d_model, inputs.d_k or AUTO, inputs.d_v or AUTO
            seed, temperature = inputs.seed, inputs.temperature
        values = ((self.heads, heads), (self.d_model, d_model), (self.d_k, d_k), (self.d_v, d_v), (self.seed, seed),
                  (self.temperature, temperature))  # fmt: skip
        for box, value in values:
            if box.value() != value:
                with signals_blocked(box):
                    box.setValue(value)
        mask = inputs.model_mask if inputs.uses_model else inputs.mask
        with signals_blocked(self.dtype):
            self.dtype.setCurrentIndex(max(0, self.dtype.findData(inputs.dtype)))
        self.dtype.setEnabled(inputs.uses_model)
        self.dtype.setToolTip(DTYPE_TIP if inputs.uses_model else "a model's precision: the toy is float32")
        with signals_blocked(self.mask), signals_blocked(self.score), signals_blocked(self.pe):
            self.mask.setCurrentIndex(max(0, self.mask.findData(mask)))
            own = "dot" if info is not None and info.pe == "relative" else "scaled"  # T5 does not scale
            self.score.setCurrentIndex(max(0, self.score.findData(own if inputs.uses_model else inputs.score)))
            self.pe.setChecked((info is not None and info.pe != "none") or (not inputs.uses_model and inputs.pe))
            self.pe.setText(PE_MODEL.get(info.pe, info.pe) if info is not None else PE_TOY)
        for name in ("heads", "d_model", "d_k", "d_v", "score", "pe", "temperature", "seed", "new_seed"):
            getattr(self, name).setEnabled(not inputs.uses_model)
        for name, box in self.row_boxes.items():
            box.show(getattr(inputs, name), inputs.uses_model)
        self.mask.setToolTip(self._mask_tip(inputs, info))
        self._show_tips(inputs, info)
        # The toy hides keys under its padding mask only; a model's pads also apply under causal.
        pads = mask != "none" if inputs.uses_model else mask == "padding"
        if info is not None and info.encoder_decoder:  # only the model's own masks are reproduced there
            pads = False
            self.mask.setEnabled(False)
            self.mask.setToolTip("An encoder-decoder model keeps its own masks: none in the encoder and cross "
                                 "blocks, causal in the decoder")  # fmt: skip
        else:
            self.mask.setEnabled(True)
        self.pad_picker.setVisible(pads)
        if pads:
            self.pad_picker.set_tokens(self.state.key_tokens, inputs.pad_positions)

    def _sync_mask_items(self, inputs, info) -> None:
        mode = "toy" if not inputs.uses_model else (info.default_mask if info is not None else "")
        if mode == "toy" and inputs.mask_file:
            mode = "toy-custom"  # a mask file was given (--mask-file): "custom" is offered too
        if mode == self._mask_mode:
            return
        self._mask_mode = mode
        with signals_blocked(self.mask):
            self.mask.clear()
            if mode.startswith("toy"):
                for m in MASKS:
                    file = m == "custom" and mode == "toy-custom"
                    self.mask.addItem(f"custom: {Path(inputs.mask_file).name}" if file else m, m)
            else:
                for m in MODEL_MASKS:
                    self.mask.addItem(f"model default: {mode}" if m == "default" and mode else
                                      "model default" if m == "default" else m, m)  # fmt: skip
        # Its names whole ("model default: padding" was cut in a narrow column); a long file's name elided
        self.mask.setMinimumWidth(min(self.mask.sizeHint().width(), MASK_WIDEST))

    def _mask_picked(self, index: int) -> None:
        mask = self.mask.itemData(index)
        if mask is None:
            return
        if self.state.inputs.uses_model:
            self.state.update_inputs(model_mask=mask)
        else:
            self.state.update_inputs(mask=mask)

    @staticmethod
    def _mask_tip(inputs, info) -> str:
        if not inputs.uses_model:
            return "causal: no peeking at later tokens; padding: hide the keys you tick below"
        own = info.default_mask if info is not None else "its own"
        return (f"The model's default is {own}. Another mask replaces it in every layer, to compare; "
                "ticked key tokens are hidden as padding under any mask but none")  # fmt: skip

    def _show_tips(self, inputs, info) -> None:
        """Why a control is disabled: the model sets it (tooltips of enabled controls are the toy's)."""
        if not inputs.uses_model:
            for name, tip in self._toy_tips.items():
                getattr(self, name).setToolTip(tip)
            self.show_problem(*self.state.problem)
            return
        if info is None:
            tips = dict.fromkeys((*SIZES, "score", "pe", "seed", "new_seed"), LOADING)
        else:
            heads = f"{info.heads} heads"
            if info.kv_heads < info.heads:
                heads = f"{info.heads} query heads sharing {info.kv_heads} key/value heads"
            positions = POSITIONS.get(info.pe, "learned position embeddings, added to the input")
            tips = {
                "heads": f"set by the model: {heads}",
                "d_model": f"set by the model: d_model = {info.d_model}",
                "d_k": f"set by the model: d_k = {info.d_k} per head",
                "d_v": f"set by the model: d_v = {info.d_k} per head",
                "temperature": "set by the model: a plain softmax (temperature 1)",
                "score": "set by the model: " + ("dot product q·k, not scaled, plus the relative position bias"
                                                 if info.pe == "relative" else "scaled dot product q·k / √d_k"),
                "pe": f"set by the model: {positions}",
                "seed": "not used: the model's trained weights, no random ones",
                "new_seed": "not used: the model's trained weights, no random ones",
            }
        for name, tip in tips.items():
            getattr(self, name).setToolTip(tip)
        self._model_tips = tips
        self.show_problem("", ())

    def show_problem(self, message: str, fields: tuple[str, ...]) -> None:
        self.problem.setText(f"⚠ {message}" if message else "")
        self.problem.setVisible(bool(message))
        model_tips = self._model_tips if self.state.inputs.uses_model else {}
        for name in SIZES:
            box = getattr(self, name)
            bad = name in fields
            box.setToolTip(message if bad else model_tips.get(name, self._tips[name]))
            if bool(box.property("invalid")) != bad:  # re-polishing re-lays out the panel: only on a change
                box.setProperty("invalid", bad)
                box.style().unpolish(box)  # re-apply the style sheet's [invalid="true"] rule
                box.style().polish(box)
