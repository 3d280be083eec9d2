"""What to compute, described once: :class:`RunSpec`, the one request of ``export``, ``explain``,
the window and sessions.

A RunSpec is frozen and compares by value (its arrays included, models/engine/held_arrays.py): everything
that decides a result. Its fields are the rows of the one option table (models/fields.py:
``FIELDS``): toy settings (the AttentionConfig fields) or model + layer (+ step, block, the target
sentence, device), sentences, labels and pad positions or arrays (embeddings, cross embeddings), a
mask by name or a custom array, weights; plus the what-if edits and the Difference flag. A new input
option is one row of ``FIELDS`` and becomes a field here, a command-line option and a JSON key.

- :meth:`RunSpec.from_args`: what ``export`` / ``explain`` parse (their files read into arrays by
  models/files/run_files.py: ``spec_from_args``);
- :meth:`RunSpec.to_json` / :meth:`RunSpec.from_json`: a versioned dict, arrays as separate named
  numpy members (as sessions store them, models/files/session.py);
- :meth:`RunSpec.validate`: the one validator (what applies to a toy and what to a model);
- what each engine takes of it is in models/run_engine.py (``toy_request``, ``load_model``, ``model_trace``,
  ``trace``): a RunSpec is data and checks, it calls no engine.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from models.config import DEFAULT_MAX_TOKENS, AttentionConfig
from models.engine.held_arrays import HeldArrays
from models.errors import InputError
from models.fields import (  # noqa: F401 - the option table's names, re-exported: callers import them from here
    BY_DEST,
    DEFAULT_MASK,
    FIELDS,
    MODEL_ONLY,
    TEXT_OPTIONS,
    TOY_ONLY,
    Field,
    add_input_arguments,
    check_applicable,
    check_command,
    check_ranges,
    check_text,
    given_options,
    given_values,
    labels,
    positions,
)

if TYPE_CHECKING:  # torch: the window's state imports this module without it
    from models.engine.edits import Edit

JSON_VERSION = 1  # of a RunSpec's JSON ("runspec": 1)
VALUES = tuple(f for f in FIELDS if f.stored and f.array is None)  # the RunSpec's plain fields, table order
ARRAY_FIELDS = {f.array: f for f in FIELDS if f.array}  # "embeddings", "cross_embeddings", "mask", "weights"


def array_name_allowed(name: str) -> bool:
    return name in ARRAY_FIELDS and name != "weights" or name.startswith("weights/") and len(name) > 8


@dataclass(frozen=True)
class RunSpec:
    """ONE frozen description of what to compute: a field per stored row of the option table
    (:data:`VALUES`, in table order, written out so that editors and type checkers see them;
    tests/models/test_runspec_fields.py keeps them equal to ``FIELDS``: names, types, defaults), then
    ``arrays``, ``edits``, ``difference`` and the policy fields (see the module's docstring)."""

    # --- the rows of FIELDS (models/fields.py), table order: `python -m models.runspec` prints them ---
    sentence: str | None = None
    labels: tuple[str, ...] | None = None
    cross_sentence: str | None = None
    cross_labels: tuple[str, ...] | None = None
    model: str | None = None
    step: str | None = None
    layer: int = 0
    block: str | None = None
    heads: int = 2
    d_model: int = 16
    d_k: int | None = None
    d_v: int | None = None
    d_out: int | None = None
    mask: str | None = None
    pad_positions: tuple[int, ...] = ()
    score: str = "scaled"
    pe: str = "none"
    temperature: float = 1.0
    seed: int = 0
    bias: bool = False
    device: str = "auto"
    dtype: str = "float32"
    max_tokens: int = DEFAULT_MAX_TOKENS
    # --- beside the rows ---
    arrays: HeldArrays = HeldArrays()  # embeddings, cross_embeddings, mask, weights/W_q …
    edits: tuple[Edit, ...] = ()  # what-if edits (models/engine/edits.py)
    difference: bool = False  # shown as edited − original
    # Policy, not part of the result (never stored, not compared): a model's layer and pad positions
    # used as given (refused when there is no such layer or token). The window's own inputs are
    # adjusted instead (a layer kept from a deeper model shows the deepest there is).
    exact: bool = field(default=True, compare=False)
    # Where arrays came from, for messages: (("weights", "weights file w.npz"), ...)
    origins: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    # --- building ----------------------------------------------------------------------------
    @classmethod
    def from_args(cls, args: argparse.Namespace, arrays: Mapping[str, np.ndarray] | None = None,
                  origins: Mapping[str, str] | None = None) -> RunSpec:  # fmt: skip
        """The RunSpec of parsed options with ``arrays`` (what their files hold): reads no file. Reading
        them (``--embeddings``, ``--mask-file``, ``--weights``, ``--text-file``) is models/files/run_files.py's
        ``spec_from_args``; ``origins``: where each array came from, for messages."""
        values = {f.dest: getattr(args, f.dest, f.default) for f in VALUES}
        return cls(**values, arrays=HeldArrays(arrays or {}), origins=tuple((origins or {}).items()))

    def replace(self, **changes: object) -> RunSpec:
        return dataclasses.replace(self, **changes)

    def with_edits(self, edits, difference: bool = False) -> RunSpec:
        return dataclasses.replace(self, edits=tuple(edits), difference=bool(difference))

    # --- reading it ----------------------------------------------------------------------------
    @property
    def uses_model(self) -> bool:
        return self.model is not None

    def given(self) -> tuple[str, ...]:
        """The dests this spec sets (values other than the default, arrays it holds), table order."""
        held = {n.split("/")[0] for n in self.arrays}
        return tuple(f.dest for f in FIELDS
                     if (f.array in held if f.array else f.stored and getattr(self, f.dest) != f.default))

    def config(self) -> AttentionConfig:
        """The toy engine's settings: its fields of the same name (not validated)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(AttentionConfig)}
        return AttentionConfig(**values | {"mask": self.mask or "none", "pad_positions": tuple(self.pad_positions)})

    # --- the one validator ---------------------------------------------------------------------
    def validate(self) -> RunSpec:
        """Refuse (InputError, one line) what ``export`` refuses before it computes: text that is
        not UTF-8, an option that would be ignored (toy-only with a model, model-only without), bad
        toy settings, arrays or lengths (pad positions, a custom mask, embeddings widths), a value
        outside its row's range (``Field.low`` / ``high``), edits that do not fit the toy's shapes.
        Reads no file and calls no torch: what needs either (a model on disk, its tokens and
        layers, the numbers themselves) is checked where the run happens (:meth:`resolve`, the
        worker, export's trace). Returns self."""
        check_text(self)
        check_applicable(self.given(), self.uses_model)
        if self.uses_model:
            if not self.sentence:
                raise InputError("--model needs --sentence")
            check_ranges(self)
            if self.edits:
                from models.pretrained.edits import check_form

                check_form(self.edits)
            return self
        from models.request_checks import toy_request

        request = toy_request(self, complete=False)
        check_ranges(self)  # after the config's own checks (a NaN temperature is named as such there)
        from models.request_checks import check_toy_request, toy_edit_shapes

        n_q, n_k = check_toy_request(request)
        if self.edits:
            from models.engine.edits import check_edit

            shapes = toy_edit_shapes(request.config, n_q, n_k, request.is_cross)
            for e in self.edits:
                check_edit(e, shapes)
        return self

    def resolve(self) -> RunSpec:
        """Find a model on disk (reads its folder; InputError when there is none): where the run
        happens, or while a session file is being read. Returns self."""
        if self.uses_model:
            from models.pretrained import resolve_model

            resolve_model(self.model)
        return self

    def notes(self) -> list[str]:
        """What the spec holds that changes nothing, said once (e.g. pad positions without the padding mask)."""
        mask = self.mask or ("model" if self.uses_model else "none")
        if self.pad_positions and not self.uses_model and mask != "padding":
            shown = ",".join(map(str, self.pad_positions))
            return [f"--pad-positions {shown} ignored: mask '{mask}' does not use them (use --mask padding)"]
        return []

    def as_traced(self, trace) -> RunSpec:
        """This spec as ``trace`` shows it: a model's layer (the runner may show the deepest there is)
        and pad positions as traced, the target and block only for an encoder-decoder."""
        if not self.uses_model or trace.config.get("source") != "pretrained":
            return self
        changes = {"layer": trace.meta.get("layer", self.layer)}
        if not trace.config.get("encoder_decoder"):
            changes |= {"cross_sentence": None, "block": None}
        return dataclasses.replace(self, **changes)

    # --- JSON ----------------------------------------------------------------------------------
    def to_json(self, prefix: str = "") -> dict:
        """``{"runspec": 1, "options": {dest: value (not the defaults)}, "arrays": {name: member},
        "edits": [EDIT, ...], "difference": bool}``; the arrays themselves are ``self.arrays``,
        stored as ``<prefix><name>.npy`` members."""
        options = {f.dest: f.to_json(getattr(self, f.dest)) for f in VALUES if getattr(self, f.dest) != f.default}
        return {"runspec": JSON_VERSION, "options": options,
                "arrays": {name: f"{prefix}{name}.npy" for name in self.arrays},
                "edits": [e.to_json() for e in self.edits], "difference": self.difference}  # fmt: skip

    @classmethod
    def from_json(cls, doc, arrays: Mapping[str, np.ndarray] | None = None, what: str = "run") -> RunSpec:
        """The RunSpec of :meth:`to_json`'s dict, with ``arrays`` read from its members
        (:func:`array_members`); InputError naming the first problem. Not validated."""
        if not isinstance(doc, dict):
            raise InputError(f"'{what}' must be an object")
        version = doc.get("runspec")
        if type(version) is not int or version < 1:
            raise InputError(f"'{what}' has no runspec version")
        if version > JSON_VERSION:
            raise InputError(f"'{what}' is a newer runspec (version {version}); this one reads {JSON_VERSION}")
        options = doc.get("options", {})
        if not isinstance(options, dict):
            raise InputError(f"'{what}.options' must be an object")
        values = {}
        for dest, value in options.items():
            f = BY_DEST.get(dest)
            if f is None or f not in VALUES:
                raise InputError(f"unknown option {dest!r} in {what}")
            values[dest] = f.from_json(value)
        array_members(doc, what)
        edits = doc.get("edits") or []
        if not isinstance(edits, list):
            raise InputError(f"'{what}.edits' must be a list")
        difference = doc.get("difference", False)
        from models.engine.edits import Edit  # torch: the window's state imports this module without it

        if not isinstance(difference, bool):
            raise InputError(f"{what} difference must be true or false, got {difference!r}")
        return cls(**values, arrays=HeldArrays(arrays or {}), edits=tuple(Edit.from_json(e) for e in edits),
                   difference=difference)  # fmt: skip


def array_members(doc: dict, what: str = "run") -> dict[str, str]:
    """``{array name: member}`` of a RunSpec's JSON (or of an older session's run), names checked."""
    names = doc.get("arrays") or {}
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        raise InputError(f"'{what}.arrays' must map names to members")
    for name in names:
        if not array_name_allowed(name):
            raise InputError(f"unknown array {name!r} in {what}")
    return names


def written_fields(values: tuple[Field, ...] = VALUES) -> str:
    """The lines of :class:`RunSpec`'s row fields as ``FIELDS`` says they are (``python -m models.runspec``
    prints them: a new row's field to write into the class)."""
    def kind(f: Field) -> str:
        return str(f.annotation).replace("<class '", "").replace("'>", "")

    default = {DEFAULT_MAX_TOKENS: "DEFAULT_MAX_TOKENS"}
    return "\n".join(f"    {f.dest}: {kind(f)} = {default.get(f.default, repr(f.default))}".replace("'", '"')
                     for f in values)  # fmt: skip


_UNWRITTEN = [f for f in VALUES if f.dest not in RunSpec.__dataclass_fields__]
if _UNWRITTEN:  # a row added to FIELDS and not written above yet (a test adds one at run time): a field all the same
    RunSpec = dataclasses.make_dataclass(  # noqa: F811 - the written class, with the new rows' fields
        "RunSpec", [(f.dest, f.annotation, field(default=f.default)) for f in _UNWRITTEN], bases=(RunSpec,),
        frozen=True)  # fmt: skip
    RunSpec.__module__ = __name__


if __name__ == "__main__":
    print(written_fields())
