"""What the user asked for and what is shown: Qt-free data with one psygnal event per field.

Two halves, as in napari's Dims beside QtDims:
- ``inputs``: everything the computation depends on (an immutable :class:`Inputs`: the window's
  controls); changing it emits ``inputs_changed`` and the window turns it into a RunSpec
  (:meth:`Inputs.to_runspec`, models/runspec.py) for the worker. With
  ``model`` empty that is the toy engine (random weights, every size settable); with a model
  name or folder it is that pretrained model's layer, and the model sets the sizes.
- what is shown: the latest trace, the stage, the head (-1 = all heads) and the focused query
  row. Widgets subscribe to these signals and never compute anything themselves.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np
from psygnal import Signal

from models.config import AttentionConfig, InputError
from models.held_arrays import HeldArrays
from models.runspec import DEFAULT_MASK, RunSpec, load_matrix
from models.tokenize import tokenize
from models.trace import STAGE_ORDER, AttentionTrace

from .run import DisplayTrace
from .stage_image import StageImage

ALL_HEADS = -1
NO_QUERY = -1
SPECIAL_TOKEN = re.compile(r"\[[A-Z]+\]|<[^<>\s]+>")
DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."


@dataclass(frozen=True)
class Inputs:
    """The user's settings, flat and JSON-friendly (they persist between launches)."""

    sentence: str = DEFAULT_SENTENCE
    cross_enabled: bool = False
    cross_sentence: str = "Das Tier überquerte die Straße nicht."
    heads: int = 2
    d_model: int = 16
    d_k: int | None = None  # None: auto (d_model // heads)
    d_v: int | None = None  # None: same as d_k
    mask: str = "none"
    pad_positions: tuple[int, ...] = ()
    score: str = "scaled"
    pe: bool = False
    temperature: float = 1.0
    seed: int = 0
    model: str = ""  # "": the toy engine; else a name ("minilm", "gpt2") or a model folder
    layer: int = 0  # the model layer traced, 0-based like models.pretrained and `export --layer`
    model_mask: str = DEFAULT_MASK  # the model's own mask, or none / causal / padding to compare
    block: str = "cross"  # an encoder-decoder model's attention: encoder, decoder or cross
    # What the command line's files give (`export` takes the same options); not saved between launches.
    d_out: int | None = None
    bias: bool = False
    embeddings_file: str = ""  # an n × d_model .npy instead of the sentence
    labels: tuple[str, ...] = ()
    cross_embeddings_file: str = ""
    cross_labels: tuple[str, ...] = ()
    weights_file: str = ""  # W.npz
    mask_file: str = ""  # boolean .npy for mask "custom"
    # Mask "custom" without a file: the mask painted in the window, rows of True = hidden (not saved
    # between launches; sessions hold it). () or another shape: nothing hidden.
    painted_mask: tuple[tuple[bool, ...], ...] = ()
    # Embeddings / weights a session brought, held in memory (no file on disk); a file above wins.
    held: HeldArrays = HeldArrays()
    # A session's model run: its layer and pad positions are used as given, refused (with export's
    # line) when the model has no such layer or token, never adjusted; any later change clears it.
    exact: bool = False

    @property
    def uses_model(self) -> bool:
        return bool(self.model)

    def config(self) -> AttentionConfig:
        return AttentionConfig(
            heads=self.heads, d_model=self.d_model, d_k=self.d_k, d_v=self.d_v, d_out=self.d_out, mask=self.mask,
            pad_positions=tuple(self.pad_positions) if self.mask == "padding" else (),
            score=self.score, pe="sinusoidal" if self.pe else "none",
            temperature=self.temperature, seed=self.seed, bias=self.bias,
        )  # fmt: skip

    @property
    def uses_files(self) -> bool:
        return bool(self.held) or any((self.embeddings_file, self.cross_embeddings_file, self.weights_file,
                                       self.mask_file))  # fmt: skip

    def to_runspec(self) -> RunSpec:
        """What these settings compute: the RunSpec the worker runs and a session stores. Files are
        read here, with ``export``'s messages (InputError); the painted mask becomes the mask array."""
        if self.uses_model:
            # Pad positions hide keys under every mask but 'none' (a decoder's causal mask included).
            pads = tuple(self.pad_positions) if self.model_mask != "none" else ()
            mask = None if self.model_mask == DEFAULT_MASK else self.model_mask
            # An encoder-decoder model reads the second sentence as its target (others ignore it:
            # the shown run's RunSpec has it only for them, RunSpec.as_traced).
            return RunSpec(model=self.model, layer=self.layer, sentence=self.sentence, mask=mask, pad_positions=pads,
                           cross_sentence=self.cross_sentence, block=self.block, exact=self.exact)  # fmt: skip
        c = self.config()
        arrays = dict(self.held)
        for name, path in (("embeddings", self.embeddings_file), ("cross_embeddings", self.cross_embeddings_file)):
            if path:
                arrays[name] = load_matrix(path, name.replace("_", " "))
        if self.weights_file:
            from models.weights import read_weights_file

            arrays = {n: a for n, a in arrays.items() if not n.startswith("weights/")}
            arrays |= {f"weights/{k}": a for k, a in read_weights_file(self.weights_file).items()}
        origins = {"weights": f"weights file {self.weights_file}"} if self.weights_file else {}
        files = self.uses_files  # labels name the rows of a matrix (without files they wait, unused)
        spec = RunSpec(
            sentence=None if "embeddings" in arrays else self.sentence, labels=self.labels or None if files else None,
            cross_sentence=self.cross_sentence if self.cross_enabled and "cross_embeddings" not in arrays else None,
            cross_labels=self.cross_labels or None if files else None, heads=c.heads, d_model=c.d_model, d_k=c.d_k,
            d_v=c.d_v, d_out=c.d_out, mask=None if c.mask == "none" else c.mask, pad_positions=c.pad_positions,
            score=c.score, pe=c.pe,
            temperature=c.temperature, seed=c.seed, bias=c.bias,
            arrays=HeldArrays({n: a for n, a in arrays.items() if n != "mask"}), origins=tuple(origins.items()),
        )  # fmt: skip
        if c.mask != "custom":
            return spec
        if self.mask_file:
            mask = load_matrix(self.mask_file, "mask")
            origins["mask"] = f"mask file {self.mask_file}"
        else:
            mask = painted_mask(spec, self.painted_mask)
        return spec.replace(arrays=HeldArrays({**spec.arrays, "mask": mask}), origins=tuple(origins.items()))


def painted_mask(spec: RunSpec, painted: tuple) -> np.ndarray:
    """Mask "custom" without a file: the painted mask, or nothing hidden when it does not fit."""
    embeddings, cross = spec.arrays.get("embeddings"), spec.arrays.get("cross_embeddings")
    n_k = len(embeddings) if embeddings is not None else len(tokenize(spec.sentence or ""))
    if cross is not None:
        n_q = len(cross)
    else:
        n_q = len(tokenize(spec.cross_sentence)) if spec.cross_sentence else n_k
    mask = np.array(painted, dtype=bool) if painted else np.zeros((0, 0), bool)
    return mask if mask.shape == (n_q, n_k) else np.zeros((n_q, n_k), bool)


@dataclass(frozen=True)
class ModelInfo:
    """What the shown pretrained model is, read from its trace (never from its files: the GUI
    thread does not open models)."""

    name: str
    model_type: str
    num_layers: int
    heads: int
    kv_heads: int
    d_model: int
    d_k: int
    default_mask: str
    pe: str  # "learned" or "rotary"
    device: str
    encoder_decoder: bool = False  # t5, bart, ...: the trace is of one block (below)
    block: str = ""  # "encoder", "decoder" or "cross"

    @classmethod
    def from_trace(cls, trace: AttentionTrace) -> ModelInfo | None:
        c = trace.config
        if c.get("source") != "pretrained":
            return None
        return cls(name=c["model"], model_type=c["model_type"], num_layers=c["num_layers"], heads=c["heads"],
                   kv_heads=c["kv_heads"], d_model=c["d_model"], d_k=c["d_k"], default_mask=c["default_mask"],
                   pe=c["pe"], device=trace.device, encoder_decoder=bool(c.get("encoder_decoder")),
                   block=c.get("block", ""))  # fmt: skip


def settings_problem(inputs: Inputs) -> tuple[str, tuple[str, ...]]:
    """``(message, names of the offending fields)``; ``("", ())`` when the settings are valid."""
    if inputs.uses_model:  # the model sets every size; the toy settings wait, unchecked
        return "", ()
    try:
        inputs.config().validate()
        if inputs.uses_files:
            inputs.to_runspec().toy_request()  # reads the files: a bad one is named here, as `export` names it
    except InputError as exc:
        message = str(exc)
        fields = tuple(f for f in ("heads", "d_model", "d_k", "d_v", "temperature") if f in message)
        return message, fields
    return "", ()


class ExplorerState:
    inputs_changed = Signal(object)  # Inputs
    settings_error_changed = Signal(str, tuple)  # message ('' when valid), offending field names
    key_tokens_changed = Signal(tuple)  # the sentence's tokens, for the padding picker
    model_info_changed = Signal(object)  # ModelInfo of the shown model, or None (toy, loading)
    trace_changed = Signal(object)  # DisplayTrace now shown
    stage_image_added = Signal(str)  # a lazily converted stage arrived for the shown trace
    stage_changed = Signal(str)
    head_changed = Signal(int)
    query_changed = Signal(int)
    focus_head_changed = Signal(int)
    colours_changed = Signal(object)  # True: weights 0..their max ("fit to data"), "log": log10, False: 0..1

    def __init__(self, inputs: Inputs | None = None, parent: object = None):
        # ``parent``: ignored (kept for callers written for the QObject this used to be).
        self._inputs = inputs or Inputs()
        self._key_tokens = () if self._inputs.uses_model else tuple(tokenize(self._inputs.sentence))
        self._problem = settings_problem(self._inputs)
        self.model_info: ModelInfo | None = None
        self.display: DisplayTrace | None = None
        self.stage_name = "weights"
        self.head = ALL_HEADS
        self.focus_head = 0  # the head the query panel explains (the one last clicked)
        self.query = NO_QUERY
        self.fit_colours = False

    # --- inputs ----------------------------------------------------------------------------
    @property
    def inputs(self) -> Inputs:
        return self._inputs

    @property
    def key_tokens(self) -> tuple[str, ...]:
        return self._key_tokens

    @property
    def settings_error(self) -> str:
        return self._problem[0]

    @property
    def problem(self) -> tuple[str, tuple[str, ...]]:
        """``(message, offending field names)``, as settings_error_changed last carried them."""
        return self._problem

    def update_inputs(self, **changes) -> None:
        old = self._inputs
        if old.exact and "exact" not in changes:
            changes = {**changes, "exact": False}  # the user changes what the session set
        new = dataclasses.replace(old, **changes)
        model_changed = new.model != old.model
        if model_changed and "pad_positions" not in changes:
            new = dataclasses.replace(new, pad_positions=())  # positions of another tokenizer's tokens
        if new.uses_model:
            # The model's tokenizer runs on the worker: its tokens arrive with the trace.
            tokens = () if model_changed else self._key_tokens
        else:
            tokens = tuple(tokenize(new.sentence))
            if new.pad_positions:  # keep only positions that still name a key of the sentence
                new = dataclasses.replace(new, pad_positions=tuple(p for p in new.pad_positions if p < len(tokens)))
        if new == old:
            return
        self._inputs = new
        if tokens != self._key_tokens:
            self._key_tokens = tokens
            self.key_tokens_changed.emit(tokens)
        if model_changed and self.model_info is not None:
            self.model_info = None  # until the new model's first trace
            self.model_info_changed.emit(None)
        problem = settings_problem(new)
        if problem != self._problem:
            self._problem = problem
            self.settings_error_changed.emit(*problem)
        self.inputs_changed.emit(new)

    def request(self) -> RunSpec | None:
        """The RunSpec of the current inputs, or None while the settings are invalid."""
        return None if self._problem[0] else self._inputs.to_runspec()

    # --- what is shown ---------------------------------------------------------------------
    def show_trace(self, display: DisplayTrace) -> None:
        self.display = display
        self._follow_model(display.trace)
        names = display.trace.names
        if self.stage_name not in names:  # e.g. 'masked' after the mask was turned off
            self.stage_name = _nearest_stage(self.stage_name, names)
        heads = max(s.heads for s in display.trace.stages)
        if self.head >= heads:
            self.head = ALL_HEADS
        self.focus_head = min(self.focus_head, heads - 1)
        if not 0 <= self.query < len(display.trace.query_tokens):
            self.query = default_query(display.trace.query_tokens)
        self.trace_changed.emit(display)

    def _follow_model(self, trace: AttentionTrace) -> None:
        """Take the model's facts, its tokens and the layer it really traced from its trace."""
        info = ModelInfo.from_trace(trace) if self._inputs.uses_model else None
        if info is not None:
            layer = trace.meta.get("layer", self._inputs.layer)
            if layer != self._inputs.layer:  # the runner showed the deepest layer there is instead
                self._inputs = dataclasses.replace(self._inputs, layer=layer)  # already computed: no request
            if trace.key_tokens != self._key_tokens:
                self._key_tokens = trace.key_tokens
                self.key_tokens_changed.emit(trace.key_tokens)
        if info != self.model_info or info is not None:
            self.model_info = info
            self.model_info_changed.emit(info)

    def add_stage_image(self, generation: int, image: StageImage) -> None:
        if self.display is not None and self.display.generation == generation:
            self.display.images[image.name] = image
            self.stage_image_added.emit(image.name)

    def set_stage(self, name: str) -> None:
        if name != self.stage_name:
            self.stage_name = name
            self.stage_changed.emit(name)

    def step(self, offset: int) -> None:
        """Move ``offset`` stages along the shown trace, stopping at either end."""
        if self.display is None:
            return
        names = self.display.trace.names
        at = names.index(self.stage_name) if self.stage_name in names else 0
        self.set_stage(names[max(0, min(len(names) - 1, at + offset))])

    def step_to_end(self, last: bool) -> None:
        if self.display is not None:
            names = self.display.trace.names
            self.set_stage(names[-1] if last else names[0])

    def set_head(self, head: int) -> None:
        if head != self.head:
            self.head = head
            self.head_changed.emit(head)
        if head != ALL_HEADS:
            self.set_focus_head(head)

    def set_focus_head(self, head: int) -> None:
        if head != self.focus_head:
            self.focus_head = head
            self.focus_head_changed.emit(head)

    def set_fit_colours(self, fit: bool | str) -> None:
        if fit != self.fit_colours or type(fit) is not type(self.fit_colours):
            self.fit_colours = fit
            self.colours_changed.emit(fit)

    def set_query(self, row: int) -> None:
        if row != self.query:
            self.query = row
            self.query_changed.emit(row)


def is_special_token(token: str) -> bool:
    """A tokenizer's marker rather than a word: [CLS], [SEP], [PAD], <s>, </s>, <|endoftext|>."""
    return bool(SPECIAL_TOKEN.fullmatch(token))


def default_query(tokens: tuple[str, ...]) -> int:
    """The query to explain first: the last one, which sees every key under any mask, unless it
    is a special token (BERT's closing [SEP]); then the last real word before it."""
    words = [i for i, token in enumerate(tokens) if not is_special_token(token)]
    return words[-1] if words else len(tokens) - 1


def _nearest_stage(wanted: str, names: tuple[str, ...]) -> str:
    """The stage to show when ``wanted`` vanished: the next one in canonical order, else the last."""
    if wanted in STAGE_ORDER:
        at = STAGE_ORDER.index(wanted)
        later = [n for n in names if n in STAGE_ORDER and STAGE_ORDER.index(n) > at]
        if later:
            return later[0]
    return names[-1]
