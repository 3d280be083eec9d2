"""Which attention to explore: the toy engine (random weights) or a real pretrained model, and
which of its layers.

The window hands in the models it found (objects with ``name``, ``path``, ``source``,
``model_type``, e.g. models.pretrained.ModelEntry) and answers :attr:`open_folder_requested`
with a folder dialog: this widget never opens models or files itself. What it knows of the
model (layers, heads) comes from the state's ``model_info``, i.e. from the model's trace.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QSpinBox, QWidget
from superqt.utils import signals_blocked

from models.step_names import step_of_folder

TOY = ""  # the model string of the toy engine
OPEN_FOLDER = "\x00open-folder"  # the data of the "Open folder…" item (never a model string)
OPEN_FILE = "\x00open-file"  # the data of the "Open GGUF file…" item
GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"
TIP = Qt.ItemDataRole.ToolTipRole
TOY_TEXT = "Toy (random weights)"
TOY_INFO = "Random weights from the seed: every size below is yours to set."
BLOCKS = (("encoder", "The source sentence attends to itself"),
          ("decoder", "The target sentence attends to itself, each token to those before it (causal)"),
          ("cross", "The target's tokens (queries) attend to the encoder's output for the source (keys, values)"))
MAX_LAYER_UNKNOWN = 999  # the layer range before the model's first trace tells the real one
FOLDER_KINDS = ("(folder)", "(checkpoint)", "(file)")  # the items added for a folder: the ones that may be removed


class ModelChooser(QGroupBox):
    """Given the state (duck-typed) and the models found, it writes ``model`` and ``layer``."""

    open_folder_requested = Signal(bool)  # True: a GGUF file rather than a folder
    about_to_choose = Signal()  # the list opened: a model may be on its way (the view gets ready)

    def __init__(self, state, entries, parent: QWidget | None = None):
        super().__init__("Model", parent)
        self.state = state
        self.combo = _Combo(self.about_to_choose)
        self.combo.setToolTip("The toy engine, a built-in or cached pretrained model, or a model folder")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(20)
        self.combo.addItem(TOY_TEXT, TOY)
        self.combo.setItemData(0, "Random projection weights from the seed; you set every size", TIP)
        for entry in entries:
            self.combo.addItem(f"{entry.name}  ({entry.source}, {entry.model_type})", entry.name)
            self.combo.setItemData(self.combo.count() - 1, str(entry.path), TIP)
        self.combo.insertSeparator(self.combo.count())
        self.combo.addItem("Open folder…", OPEN_FOLDER)
        self.combo.setItemData(self.combo.count() - 1, "A Hugging Face model folder: config.json, "
                               "model.safetensors (or pytorch_model.bin) and tokenizer.json", TIP)  # fmt: skip
        self.combo.addItem("Open GGUF file…", OPEN_FILE)
        self.combo.setItemData(self.combo.count() - 1, "A model file of llama.cpp, Ollama, LM Studio or GPT4All "
                               "(.gguf): its config and tokenizer are read from it", TIP)  # fmt: skip
        self.layer = QSpinBox()
        self.layer.setToolTip("The transformer block whose attention is traced; the first is layer 0")
        self.layer_range = QLabel()
        self.layer_range.setObjectName("layerRange")
        self.block = QComboBox()  # an encoder-decoder model's three attentions
        for name, tip in BLOCKS:
            self.block.addItem(name, name)
            self.block.setItemData(self.block.count() - 1, tip, TIP)
        self.block.setToolTip("Which attention of the encoder-decoder model: the encoder's, the decoder's (causal), "
                              "or the decoder's queries over the encoder's output (cross)")  # fmt: skip
        self.info = QLabel(TOY_INFO)
        self.described = False  # the box shows a model's facts (its layer row and range laid out)
        self.info.setObjectName("modelInfo")
        self.info.setWordWrap(True)

        layer_row = QHBoxLayout()
        layer_row.addWidget(self.layer, 1)
        layer_row.addWidget(self.layer_range)
        form = QFormLayout(self)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # a narrow column: fields below labels
        form.addRow(self.combo)
        form.addRow("Layer", layer_row)
        form.addRow("Block", self.block)
        self._form = form  # the layer row is hidden for the toy engine (a single layer), the block row unless
        # the model is an encoder-decoder
        form.addRow(self.info)

        self.combo.activated.connect(self._picked)
        self.layer.valueChanged.connect(lambda v: state.update_inputs(layer=v))
        self.block.activated.connect(lambda i: state.update_inputs(block=self.block.itemData(i)))
        state.inputs_changed.connect(self.sync)
        state.model_info_changed.connect(lambda _info: self.sync(state.inputs))
        self.sync(state.inputs)

    # --- the list of models ----------------------------------------------------------------
    def add_folder(self, folder: str) -> int:
        """The item of a model folder, added above the separator when new. A training step's
        folder (``RUN/checkpoints/step-N``) reads "RUN · step N" and takes the place of another
        step of the same run (the timeline's slider visits forty: the list keeps one)."""
        index = self.combo.findData(folder)
        if index >= 0:
            return index
        label = f"{Path(folder).name}  ({'folder' if not Path(folder).is_file() else 'file'})"
        step = step_of_folder(folder)
        if step is not None:
            run, number = step
            label = f"{run.name} · step {number}  (checkpoint)"  # the run's, as "induction  (built-in, llama)"
            for i in range(self.combo.count() - 1, -1, -1):
                other = step_of_folder(self.combo.itemData(i)) if isinstance(self.combo.itemData(i), str) else None
                if other is not None and other[0] == run and self.combo.itemText(i).endswith(FOLDER_KINDS):
                    with signals_blocked(self.combo):
                        self.combo.removeItem(i)
        index = self.combo.count() - 3  # above the separator, "Open folder…" and "Open GGUF file…"
        with signals_blocked(self.combo):
            self.combo.insertItem(index, label, folder)
            self.combo.setItemData(index, folder, TIP)
        return index

    def remove_folder(self, folder: str) -> None:
        """Forget a folder that did not open (the built-in and cached models always stay)."""
        index = self.combo.findData(folder)
        if index > 0 and self.combo.itemText(index).endswith(FOLDER_KINDS):
            with signals_blocked(self.combo):
                self.combo.removeItem(index)

    def models(self) -> list[str]:
        """The model strings offered, toy first (for tests)."""
        data = [self.combo.itemData(i) for i in range(self.combo.count())]
        return [d for d in data if isinstance(d, str) and d not in (OPEN_FOLDER, OPEN_FILE)]

    def _picked(self, index: int) -> None:
        data = self.combo.itemData(index)
        if data == OPEN_FOLDER:
            self.sync(self.state.inputs)  # stay on the current model until a folder is chosen
            self.open_folder_requested.emit(False)
        elif data == OPEN_FILE:
            self.sync(self.state.inputs)
            self.open_folder_requested.emit(True)
        elif isinstance(data, str):
            self.state.update_inputs(model=data)

    # --- following the state ---------------------------------------------------------------
    def sync(self, inputs) -> None:
        index = self.combo.findData(inputs.model)
        if index < 0:  # a folder from the settings or the command line
            index = self.add_folder(inputs.model)
        with signals_blocked(self.combo):
            self.combo.setCurrentIndex(index)
        self.combo.setToolTip(inputs.model if inputs.uses_model else TOY_TEXT)
        info = self.state.model_info
        # Until the chosen model's first trace its facts are unknown: "Loading…" and any layer, in the
        # room the last model's facts took. A step of the training timeline switches models in ~40 ms:
        # the column's texts grew and shrank with each, and every panel below them was laid out and
        # painted again, twice a step. (From the toy, whose box has no layer row, nothing is held.)
        # Only sizes laid out are held: a box never shown (--timeline's step chosen before the window
        # opened) is Qt's 640 px default wide, which made the window open 1,945 px wide.
        hold = inputs.uses_model and info is None and self.described and self.isVisible()
        self.info.setMinimumHeight(self.info.height() if hold else 0)
        for widget in (self.layer, self.layer_range):
            widget.setMinimumWidth(widget.width() if hold else 0)
        self.described = inputs.uses_model and (info is not None or hold)  # a model's facts in the box
        with signals_blocked(self.layer):
            if not inputs.uses_model:
                self.info.setText(TOY_INFO)
            else:
                self.layer.setRange(0, info.num_layers - 1 if info is not None else MAX_LAYER_UNKNOWN)
                self.layer.setValue(inputs.layer)
                self.layer_range.setText(f"of 0–{info.num_layers - 1}" if info is not None else "")
                self.info.setText(_describe(info) if info is not None else "Loading…")
        self._form.setRowVisible(1, inputs.uses_model)
        encdec = inputs.uses_model and info is not None and info.encoder_decoder
        with signals_blocked(self.block):
            self.block.setCurrentIndex(max(0, self.block.findData(inputs.block)))
        self._form.setRowVisible(2, encdec)


class _Combo(QComboBox):
    def __init__(self, opened: Signal):
        super().__init__()
        self._opened = opened

    def showPopup(self):  # noqa: N802 - Qt API
        self._opened.emit()
        super().showPopup()


def _describe(info) -> str:
    """One line about the model: "bert · 6 layers · 12 heads × 32 · d_model 384"."""
    heads = f"{info.heads} heads × {info.d_k}"
    if info.kv_heads < info.heads:
        heads = f"{info.heads} query heads × {info.d_k}, {info.kv_heads} key/value heads"
    if info.encoder_decoder:
        return f"{info.model_type} · {info.block} block: {info.num_layers} layers · {heads} · d_model {info.d_model}"
    return f"{info.model_type} · {info.num_layers} layers · {heads} · d_model {info.d_model}"
