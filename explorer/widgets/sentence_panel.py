"""The sentence field (recomputes as you type, debounced), example sentences, and the optional
second sentence that turns self-attention into cross-attention."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QGroupBox, QLabel, QLineEdit, QVBoxLayout, QWidget
from superqt.utils import signals_blocked

from explorer.widgets.frames import debounced
from explorer.widgets.labels import uncovered_characters

UNSEEN_SHOWN = 6  # code points named under the sentence box, at most
LONG_TEXT = 20_000  # characters: longer (File → Open text…, --text-file), the box shows its start, read-only
PREVIEW = 2_000  # characters of a long text shown (a line edit lays out all of its text on every change)
MAX_TEXT = (1 << 31) - 1  # QLineEdit's own default is 32,767 characters, silently cut

EXAMPLES_PROMPT = "Examples…"
CROSS_TIP = "The second sentence asks (queries); the first answers (keys, values)"
CROSS_MODEL_TIP = ("Not with a decoder or encoder model: its layers attend within one sentence (self-attention); "
                   "an encoder-decoder model (t5, bart, ...) reads the second box as its target")
LONG_TIP = "A long text (File → Open text…): its start is shown; pick an example or open another text to replace it"
SENTENCE_HINT = "Type a sentence: its words become the tokens"
CROSS_HINT = "Second sentence (the queries)"
SOURCE_HINT = "Source sentence (the encoder's input)"
TARGET_HINT = "Target sentence (the decoder's input)"
SOURCE_TIP = "The source: the encoder reads it; the cross attention's keys and values come from it"
TARGET_TIP = "The target: its tokens, as the tokenizer encodes them, are the decoder's input ids (as BertViz does)"


class SentencePanel(QGroupBox):
    """Given the state (duck-typed), it writes the sentences into it and follows its changes."""

    def __init__(self, state, examples: list[str], parent: QWidget | None = None):
        super().__init__("Sentence", parent)
        self.state = state
        self.sentence_edit = QLineEdit()
        # Qt cuts text silently at 32,767 characters: no cut here; the token limit answers with a message.
        self.sentence_edit.setMaxLength(MAX_TEXT)
        self.sentence_edit.setPlaceholderText(SENTENCE_HINT)
        self.sentence_edit.setClearButtonEnabled(True)
        self.examples = QComboBox()
        self.examples.addItem(EXAMPLES_PROMPT)
        self.examples.addItems(examples)
        self.examples.setToolTip("Pick an example sentence")
        # Long examples must not widen the whole column: show about 30 characters of each.
        self.examples.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.examples.setMinimumContentsLength(20)
        self.cross_check = QCheckBox("Cross-attention (2nd sentence)")
        self.cross_check.setToolTip(CROSS_TIP)
        self.cross_edit = QLineEdit()
        self.cross_edit.setMaxLength(MAX_TEXT)
        self.cross_edit.setPlaceholderText(CROSS_HINT)

        # Characters no installed font draws are boxes in the text box: this line names them.
        self.unseen_label = QLabel()
        self.unseen_label.setWordWrap(True)
        self.unseen_label.hide()

        layout = QVBoxLayout(self)
        layout.addWidget(self.sentence_edit)
        layout.addWidget(self.unseen_label)
        layout.addWidget(self.examples)
        layout.addWidget(self.cross_check)
        layout.addWidget(self.cross_edit)

        # The pause restarts on every key; the text goes in once it has lasted (frames.debounced).
        self._sentence_pause = debounced(self._push_sentence, "typing pause", self)
        self._cross_pause = debounced(self._push_cross, "typing pause", self)
        self.sentence_edit.textChanged.connect(lambda _text: self._sentence_pause())
        self.sentence_edit.textChanged.connect(lambda _text: self._name_unseen())
        self.cross_edit.textChanged.connect(lambda _text: self._name_unseen())
        self.cross_edit.textChanged.connect(lambda _text: self._cross_pause())
        self.examples.activated.connect(self._pick_example)
        self.cross_check.toggled.connect(self._toggle_cross)
        state.inputs_changed.connect(self.sync)
        if hasattr(state, "model_info_changed"):
            state.model_info_changed.connect(lambda _info: self.sync(state.inputs))
        self.sync(state.inputs)

    def sync(self, inputs) -> None:
        """Show ``inputs`` without echoing them back (and without moving a typist's cursor)."""
        for edit, text in ((self.sentence_edit, inputs.sentence), (self.cross_edit, inputs.cross_sentence)):
            long = len(text) > LONG_TEXT  # 131,072 words: typing into them would lay out 800 KB per key
            shown = f"{text[:PREVIEW]} … ({len(text.split()):,} words, from a file)" if long else text
            if edit.text() != shown and not (edit.hasFocus() and self._pending(edit)):
                with signals_blocked(edit):
                    edit.setText(shown)
                    edit.setCursorPosition(0)  # show the start of a long sentence, not its end
                self._name_unseen()
            edit.setReadOnly(long)
        with signals_blocked(self.cross_check):
            self.cross_check.setChecked(inputs.cross_enabled)
        # A pretrained model's layer is self-attention: one sentence supplies queries, keys and values;
        # an encoder-decoder model reads the second sentence as its target (the decoder's input).
        encdec = self.encoder_decoder(inputs)
        self.cross_check.setEnabled(not inputs.uses_model)
        self.cross_check.setToolTip(CROSS_MODEL_TIP if inputs.uses_model else CROSS_TIP)
        self.cross_edit.setEnabled(encdec or (inputs.cross_enabled and not inputs.uses_model))
        self.sentence_edit.setPlaceholderText(SOURCE_HINT if encdec else SENTENCE_HINT)
        self.cross_edit.setPlaceholderText(TARGET_HINT if encdec else CROSS_HINT)
        self.cross_edit.setToolTip(TARGET_TIP if encdec else "")
        long = self.sentence_edit.isReadOnly()
        self.sentence_edit.setToolTip(LONG_TIP if long else SOURCE_TIP if encdec else "")

    def encoder_decoder(self, inputs) -> bool:
        info = getattr(self.state, "model_info", None)
        return inputs.uses_model and bool(getattr(info, "encoder_decoder", False))

    def _name_unseen(self) -> None:
        text = self.sentence_edit.text() + self.cross_edit.text()
        unseen = uncovered_characters(text, self.sentence_edit.font())
        if unseen:
            shown = " ".join(f"U+{ord(c):04X}" for c in unseen[:UNSEEN_SHOWN])
            shown += " …" if len(unseen) > UNSEEN_SHOWN else ""
            self.unseen_label.setText(f"No installed font draws {shown} (boxes above; the plots write the code points)")
        self.unseen_label.setVisible(bool(unseen))

    def is_typing(self) -> bool:
        """True while typed text waits for the typing pause before it reaches the state."""
        return self._sentence_pause.pending or self._cross_pause.pending

    def _pending(self, edit: QLineEdit) -> bool:
        pause = self._sentence_pause if edit is self.sentence_edit else self._cross_pause
        return pause.pending

    def flush(self) -> None:
        """Push any text still waiting for the typing pause (before saving, screenshots, tests)."""
        self._sentence_pause.flush()
        self._cross_pause.flush()

    def _push_sentence(self) -> None:
        if not self.sentence_edit.isReadOnly():  # a long text's preview is never pushed back
            self.state.update_inputs(sentence=self.sentence_edit.text())

    def _push_cross(self) -> None:
        if not self.cross_edit.isReadOnly():
            self.state.update_inputs(cross_sentence=self.cross_edit.text())

    def _pick_example(self, index: int) -> None:
        if index > 0:
            if self.sentence_edit.isReadOnly():  # a long text gives way to the example
                self.state.update_inputs(sentence=self.examples.itemText(index))
            else:
                self.sentence_edit.setText(self.examples.itemText(index))
                self.flush()
        with signals_blocked(self.examples):
            self.examples.setCurrentIndex(0)

    def _toggle_cross(self, on: bool) -> None:
        self.cross_edit.setEnabled(self.encoder_decoder(self.state.inputs) or (on and not self.state.inputs.uses_model))
        if on:
            self.cross_edit.setFocus(Qt.FocusReason.OtherFocusReason)
        self.state.update_inputs(cross_enabled=on, cross_sentence=self.cross_edit.text())
