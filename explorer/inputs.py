"""The window's inputs: every setting the computation depends on, flat and JSON-friendly (the
window's controls), and how they become the RunSpec the worker runs (models/runspec.py). Qt-free.

With ``model`` empty that is the toy engine (random weights, every size settable); with a model
name or folder it is that pretrained model's layer, and the model sets the sizes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from models.config import AttentionConfig, InputError
from models.fields import FIELDS, MODEL_MASKS, Field
from models.held_arrays import HeldArrays
from models.runspec import DEFAULT_MASK, RunSpec, load_matrix
from models.tokenize import tokenize

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


# --- each input as a row of the option table (what the saved settings are derived from) ----------
# An Inputs field named as a FIELDS row (sentence, heads, ..., block) is that row: saved between
# launches and checked by it (Field.from_json: type, choices, range), but for FOR_THIS_RUN. An array
# row's file (``<array>_file``: embeddings_file, mask_file, ...) is never saved. The window's own
# inputs are WINDOW_ROWS, rows of the same kind (saved and checked alike), which also give a FIELDS
# row the form of its control (pe: the row's "sinusoidal" / "none" as a checkbox). NOT_SAVED: what a
# session or the command line brings for one run. A new input option is one row of FIELDS and a
# field of Inputs of the same name; a new field of Inputs that is none of these is refused below.
FOR_THIS_RUN = ("d_out", "bias", "labels", "cross_labels")  # they come with the command line's files
WINDOW_ROWS = (
    Field("cross_enabled", "input", "toy", "the second sentence is used (its tokens are the queries)", type=None,
          flag=True, default=False),
    Field("pe", "attention", "toy", "sinusoidal positions (the pe row as a checkbox)", type=None, flag=True,
          default=False),
    Field("model_mask", "attention", "model", "a model's own mask, or one to compare", choices=MODEL_MASKS,
          default=DEFAULT_MASK),
)  # fmt: skip
NOT_SAVED = ("painted_mask", "held", "exact")


def input_rows(fields: tuple[Field, ...] = FIELDS, inputs: type = Inputs) -> dict[str, Field | None]:
    """Every field of ``inputs`` (in order) with the row that saves and checks it, or None when it is
    not saved. ValueError for a field that is neither a row nor named here."""
    by_dest, window = {f.dest: f for f in fields}, {f.dest: f for f in WINDOW_ROWS}
    files = {f"{f.array}_file" for f in fields if f.array}
    rows: dict[str, Field | None] = {}
    for name in (f.name for f in dataclasses.fields(inputs)):
        if name in window:
            rows[name] = window[name]
        elif name in NOT_SAVED or name in FOR_THIS_RUN or name in files:
            rows[name] = None
        elif name in by_dest and by_dest[name].array is None:
            rows[name] = by_dest[name]
        else:
            raise ValueError(f"Inputs.{name} is neither a FIELDS row nor a window-only input (explorer/inputs.py)")
    return rows


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


def same_computation(a: Inputs, b: Inputs) -> bool:
    """Whether edits of ``a``'s run still edit ``b``'s: all but the painted mask (a mask edit of its
    own) and the session's exactness (how a layer is chosen, not what is computed) alike."""
    ignored = {"painted_mask": (), "exact": False}
    return dataclasses.replace(a, **ignored) == dataclasses.replace(b, **ignored)
