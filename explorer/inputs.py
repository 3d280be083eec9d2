"""The window's inputs: the form its controls fill in, and how it becomes the RunSpec the worker
runs (models/runspec.py). Qt-free.

The form is not a second list of options: :class:`Inputs` is made from the one option table
(models/fields.py: ``FIELDS``), as :class:`~models.runspec.RunSpec` is. Each row the window offers
is a field of the same name (an array row as the path of its file, ``<array>_file``), plus the
window's own rows (:data:`WINDOW_ROWS`: the second sentence's checkbox, positions as a checkbox, a
model's mask) and what a session brings for one run (:data:`ONE_RUN`). A new input option is one
row of ``FIELDS``: it is then a field here, saved and restored and checked by its row, and a box in
the settings panel made from the row (explorer/widgets/row_boxes.py).

Why a form beside the RunSpec: a RunSpec is what is computed, and one with a model refuses the
toy's settings (as ``export`` does). The form also holds what waits: the toy's heads and widths
while a model is chosen, the second sentence while cross-attention is off, files not read yet. Its
one way to a request is :meth:`Inputs.to_runspec`.

With ``model`` empty that is the toy engine (random weights, every size settable); with a model
name or folder it is that pretrained model's layer, and the model sets the sizes.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import numpy as np

from models.config import AttentionConfig, InputError
from models.engine.held_arrays import HeldArrays
from models.engine.tokenize import tokenize
from models.fields import FIELDS, MODEL_MASKS, Field
from models.files.run_files import load_matrix
from models.runspec import DEFAULT_MASK, RunSpec
from models.runspec import VALUES as RUNSPEC_ROWS

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."

# --- the form's fields, from the option table ---------------------------------------------
# What the form starts with where a row's default is "not given" (None).
FORM_DEFAULTS = {"sentence": DEFAULT_SENTENCE, "cross_sentence": "Das Tier überquerte die Straße nicht.",
                 "mask": "none", "model": "", "block": "cross", "labels": (), "cross_labels": ()}  # fmt: skip
# Rows with no control in the window: the model list opens a training step's folder itself; the
# worker chooses the device; the window has its own length limit (models.checks).
NOT_OFFERED = ("step", "device", "max_tokens")
# Rows that come with the command line's files (`export` takes the same options): not saved.
FOR_THIS_RUN = ("d_out", "bias", "labels", "cross_labels")
# The window's own inputs, rows of the same kind (saved and checked alike); one of them gives a
# FIELDS row the form of its control (pe: the row's "sinusoidal" / "none" as a checkbox).
WINDOW_ROWS = (
    Field("cross_enabled", "input", "toy", "the second sentence is used (its tokens are the queries)", type=None,
          flag=True, default=False),
    Field("pe", "attention", "toy", "sinusoidal positions (the pe row as a checkbox)", type=None, flag=True,
          default=False),
    Field("model_mask", "attention", "model", "a model's own mask, or one to compare", choices=MODEL_MASKS,
          default=DEFAULT_MASK),
)  # fmt: skip
# What a session (or the command line's files) brings for one run: never saved.
ONE_RUN = (
    # Mask "custom" without a file: the mask painted in the window, rows of True = hidden. () or
    # another shape: nothing hidden.
    ("painted_mask", tuple[tuple[bool, ...], ...], ()),
    # Embeddings / weights a session brought, held in memory (no file on disk); a file wins.
    ("held", HeldArrays, HeldArrays()),
    # A session's model run: its layer and pad positions are used as given, refused (with export's
    # line) when the model has no such layer or token, never adjusted; any later change clears it.
    ("exact", bool, False),
)
NOT_SAVED = tuple(name for name, _, _ in ONE_RUN)


def own_shape(fields: tuple[Field, ...]) -> tuple[tuple[str, str], ...]:
    """``(row dest, Inputs attribute)`` of the rows the form holds in a shape of its own (their
    ``own_shape`` flag in the option table): the sentences (the second one waits while cross-attention
    is off), labels (they name a file's rows), the mask (a model's own is the ``model_mask`` attribute;
    the toy's "none" is not given), pad positions (only where the mask uses them), positions as a
    checkbox, the model ("" is the toy). :meth:`Inputs.to_runspec`, explorer/files/session_io.py's
    ``inputs_from_spec`` and ``not_shown`` all read this one mapping; every other row the form has
    passes to and from a RunSpec as it is: a new row needs nothing here."""
    return tuple((f.dest, MODEL_ATTRIBUTE.get(f.dest, f.dest)) for f in fields if f.own_shape)


MODEL_ATTRIBUTE = {"mask": "model_mask"}  # a row whose value a model's run keeps in another attribute
OWN_SHAPE = own_shape(FIELDS)


def own_values(form: type, values: dict[str, Any], attributes: bool = False) -> dict[str, Any]:
    """The entries of ``values`` (by row dest) whose row ``form`` holds in a shape of its own, keyed by
    the row's dest (a RunSpec's field) or, with ``attributes``, by the form's attribute that holds it."""
    return {attribute if attributes else dest: values[dest] for dest, attribute in form.own_shape if dest in values}


def _annotation(row: Field) -> Any:
    """The form's type of a row's value: the row's own (``int | None``: "auto", as d_k), except that
    text and lists are never None here (an empty text, an empty list)."""
    kind = row.annotation
    if row.type in (int, float) and not row.flag:
        return kind
    others = [a for a in getattr(kind, "__args__", ()) if a is not type(None)]
    return others[0] if isinstance(kind, types.UnionType) and len(others) == 1 else kind


def form_fields(fields: tuple[Field, ...] = FIELDS) -> list[tuple[str, Any, Any, Field | None]]:
    """``(name, annotation, default, row)`` of each input in order; ``row`` saves and checks it
    (None: not saved between launches)."""
    window = {f.dest: f for f in WINDOW_ROWS}
    out: list[tuple[str, Any, Any, Field | None]] = []
    for f in fields:
        if not f.stored or f.dest in NOT_OFFERED:
            continue
        if f.array:  # a file option: the path the window reads (never saved: the file may be gone)
            out.append((f"{f.array}_file", str, "", None))
            continue
        row = window.get(f.dest, f)  # pe: the row as the window's checkbox
        default = row.default if row is not f else FORM_DEFAULTS.get(f.dest, f.default)
        out.append((f.dest, _annotation(row), default, None if f.dest in FOR_THIS_RUN else row))
    out += [(f.dest, _annotation(f), f.default, f) for f in WINDOW_ROWS if f.dest not in {g.dest for g in fields}]
    return out + [(name, annotation, default, None) for name, annotation, default in ONE_RUN]


def input_rows(fields: tuple[Field, ...] = FIELDS) -> dict[str, Field | None]:
    """Every input's name (in order) with the row that saves and checks it, or None when it is not saved."""
    return {name: row for name, _, _, row in form_fields(fields)}


class _InputsMethods:
    """The methods of :class:`Inputs` (its fields come from the option table)."""

    @property
    def uses_model(self) -> bool:
        return bool(self.model)

    def config(self) -> AttentionConfig:
        """The toy engine's settings: the form's fields of the same name, positions and the mask's
        pad positions in the engine's shape."""
        names = {f.name for f in dataclasses.fields(AttentionConfig)} & set(self.rows)
        return AttentionConfig(**{name: getattr(self, name) for name in names} | {
            "pad_positions": tuple(self.pad_positions) if self.mask == "padding" else (),
            "pe": "sinusoidal" if self.pe else "none"})  # fmt: skip

    def passed(self, kind: str) -> dict[str, Any]:
        """The rows this form passes to a RunSpec as they are (every row but :func:`own_shape`'s and
        what the form does not offer) for a run of ``kind`` ("toy" or "model")."""
        return {f.dest: getattr(self, f.dest) for f in passed_rows(type(self), kind)}

    @property
    def uses_files(self) -> bool:
        return bool(self.held) or any((self.embeddings_file, self.cross_embeddings_file, self.weights_file,
                                       self.mask_file))  # fmt: skip

    @property
    def files_unread(self) -> bool:
        """True when a file is set whose arrays are not held yet (read where the run happens)."""
        roles = {n.split("/")[0] for n in self.held}
        return any(getattr(self, field) and role not in roles for field, role in FILE_ROLES.items())

    def with_files_read(self, names: tuple[str, ...] | None = None) -> Inputs:
        """These inputs with their files' arrays in ``held``: each file field of ``names`` (default:
        every one set whose array is not held yet) read now, with ``export``'s reader and messages
        (InputError). The window reads a file once, when it is opened; its requests read none."""
        held = HeldArrays(self.held)
        for field, role in FILE_ROLES.items():
            path = getattr(self, field)
            if path and (role not in {n.split("/")[0] for n in held} if names is None else field in names):
                width = None if self.uses_model else self.d_model  # an embeddings file's, checked from its header
                held = HeldArrays({**held.without(role), **read_file(role, path, width)})
        return dataclasses.replace(self, held=held)

    def to_runspec(self) -> RunSpec:
        """What these settings compute: the RunSpec the worker runs and a session stores; the painted
        mask becomes the mask array. A file is read here only if it was not when opened
        (:meth:`with_files_read`), with ``export``'s messages (InputError)."""
        if self.uses_model:
            # Pad positions hide keys under every mask but 'none' (a decoder's causal mask included).
            pads = tuple(self.pad_positions) if self.model_mask != "none" else ()
            mask = None if self.model_mask == DEFAULT_MASK else self.model_mask
            # An encoder-decoder model reads the second sentence as its target (others ignore it:
            # the shown run's RunSpec has it only for them, RunSpec.as_traced).
            own = dict(model=self.model, sentence=self.sentence, mask=mask, pad_positions=pads,
                       cross_sentence=self.cross_sentence)
            return RunSpec(**self.passed("model"), **own_values(type(self), own), exact=self.exact)
        c = self.config()
        arrays = dict(self.with_files_read().held)
        origins = {"weights": f"weights file {self.weights_file}"} if self.weights_file else {}
        files = self.uses_files  # labels name the rows of a matrix (without files they wait, unused)
        own = dict(
            sentence=None if "embeddings" in arrays else self.sentence, labels=self.labels or None if files else None,
            cross_sentence=self.cross_sentence if self.cross_enabled and "cross_embeddings" not in arrays else None,
            cross_labels=self.cross_labels or None if files else None, mask=None if c.mask == "none" else c.mask,
            pad_positions=c.pad_positions, pe=c.pe, model=None,
        )  # fmt: skip
        spec = RunSpec(**self.passed("toy"), **own_values(type(self), own),
                       arrays=HeldArrays({n: a for n, a in arrays.items() if n != "mask"}),
                       origins=tuple(origins.items()))  # fmt: skip
        if c.mask != "custom":
            return spec
        if self.mask_file:
            mask = arrays["mask"]
            origins["mask"] = f"mask file {self.mask_file}"
        else:
            mask = painted_mask(spec, self.painted_mask)
        return spec.replace(arrays=HeldArrays({**spec.arrays, "mask": mask}), origins=tuple(origins.items()))


FILE_ROLES = {"embeddings_file": "embeddings", "cross_embeddings_file": "cross_embeddings",
              "weights_file": "weights", "mask_file": "mask"}  # a file field: the array(s) it holds  # fmt: skip


def read_file(role: str, path: str, d_model: int | None = None) -> dict[str, np.ndarray]:
    """The arrays of the file at ``path`` holding ``role``'s (``weights``: ``weights/W_q``, …); ``d_model``:
    the width an embeddings matrix must have, refused from its header (None: not checked here)."""
    if role == "weights":
        from models.engine.weights import read_weights_file

        return {f"weights/{k}": a for k, a in read_weights_file(path).items()}
    return {role: load_matrix(path, role.replace("_", " "), None, d_model)}


def passed_rows(form: type, kind: str) -> tuple[Field, ...]:
    """The rows of a run of ``kind`` that ``form`` (an :class:`Inputs` class) passes to and from a
    RunSpec as they are: the RunSpec's rows for that kind, which the form has, not of its
    :func:`own_shape` (explorer/files/session_io.py reads them back with this too)."""
    own = {dest for dest, _ in form.own_shape}
    return tuple(row for name, row in form.table.items() if row in RUNSPEC_ROWS and row.applies in (kind, "both")
                 and name not in own)  # fmt: skip


def make_inputs(fields: tuple[Field, ...] = FIELDS) -> type:
    """The form's class for an option table (``FIELDS``; tests pass a table with a new row)."""
    made = dataclasses.make_dataclass(
        "Inputs", [(name, annotation, dataclasses.field(default=default))
                   for name, annotation, default, _ in form_fields(fields)],
        bases=(_InputsMethods,), frozen=True)  # fmt: skip
    made.__module__ = __name__
    made.rows = input_rows(fields)  # each input's row, or None (the settings panel's boxes follow them)
    # The option table's row each input holds the value of (saved or not): what passes to a RunSpec.
    made.table = {f.dest: f for f in fields if f.stored and f.array is None and f.dest not in NOT_OFFERED}
    made.own_shape = own_shape(fields)  # the rows it turns to and from a RunSpec by hand
    made.__doc__ = """The window's form, flat and JSON-friendly: one field per row of the option table
    the window offers (see the module's docstring); what its rows say is saved between launches."""
    return made


Inputs = make_inputs()


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


# The toy's numeric options (its rows of type int or float): the ones a validation message may name
TOY_NUMBERS = tuple(f.dest for f in FIELDS if f.applies == "toy" and f.type in (int, float))


def settings_problem(inputs: Inputs) -> tuple[str, tuple[str, ...]]:
    """``(message, names of the offending fields)``; ``("", ())`` when the settings are valid."""
    if inputs.uses_model:  # the model sets every size; the toy settings wait, unchecked
        return "", ()
    try:
        inputs.config().validate()  # the files are read and checked on the worker (explorer.run.FileRequest)
    except InputError as exc:
        message = str(exc)
        fields = tuple(f for f in TOY_NUMBERS if f in message)
        return message, fields
    return "", ()


def same_computation(a: Inputs, b: Inputs) -> bool:
    """Whether edits of ``a``'s run still edit ``b``'s: all but the painted mask (a mask edit of its
    own) and the session's exactness (how a layer is chosen, not what is computed) alike."""
    ignored = {"painted_mask": (), "exact": False}
    return dataclasses.replace(a, **ignored) == dataclasses.replace(b, **ignored)
