"""What to compute, described once: :class:`RunSpec`, the one request of ``export``, ``explain``,
the window and sessions.

A RunSpec is frozen and compares by value (its arrays included, models/engine/held_arrays.py): everything
that decides a result. Its fields are the rows of the one option table (models/fields.py:
``FIELDS``): toy settings (the AttentionConfig fields) or model + layer (+ step, block, the target
sentence, device), sentences, labels and pad positions or arrays (embeddings, cross embeddings), a
mask by name or a custom array, weights; plus the what-if edits and the Difference flag. A new input
option is one row of ``FIELDS`` and becomes a field here, a command-line option and a JSON key.

- :meth:`RunSpec.from_args`: what ``export`` / ``explain`` parse (their files read into arrays);
- :meth:`RunSpec.to_json` / :meth:`RunSpec.from_json`: a versioned dict, arrays as separate named
  numpy members (as sessions store them, models/files/session.py);
- :meth:`RunSpec.validate`: the one validator (what applies to a toy and what to a model);
- :meth:`RunSpec.toy_request` (the toy engine's internal input, models.config.AttentionRequest),
  :meth:`RunSpec.load_model` / :meth:`RunSpec.model_trace` (a model's layer), :meth:`RunSpec.trace`.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from models.config import AttentionConfig, AttentionRequest
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


def load_matrix(path: str, what: str, max_tokens: int | None = None, d_model: int | None = None) -> np.ndarray:
    """Read a ``.npy`` file without ever unpickling, with a clear message on failure
    (models.io: a regular file only, its header checked before its data: models/io/matrix_header.py);
    read-only, so that HeldArrays keeps it without a copy."""
    from models.io import read_npy
    from models.io.matrix_header import matrix_check

    matrix = read_npy(path, f"{what} file", matrix_check(what, path, max_tokens, d_model))
    matrix.flags.writeable = False
    return matrix


def array_name_allowed(name: str) -> bool:
    return name in ARRAY_FIELDS and name != "weights" or name.startswith("weights/") and len(name) > 8


class _RunSpecMethods:
    """The methods of :class:`RunSpec` (its fields come from the option table)."""

    # --- building ----------------------------------------------------------------------------
    @classmethod
    def from_args(cls, args: argparse.Namespace, arrays: Mapping[str, np.ndarray] | None = None) -> RunSpec:
        """The RunSpec of parsed options; their files (``--embeddings``, ``--mask-file``,
        ``--weights`` …) are read now, unless ``arrays`` gives what they held."""
        values = {f.dest: getattr(args, f.dest, f.default) for f in VALUES}
        if getattr(args, "text_file", None):  # a long text as the sentence
            from models.io.text_file import read_text_file

            if values["sentence"] is not None:
                raise InputError("give --sentence or --text-file, not both")
            values["sentence"] = read_text_file(args.text_file)
        origins = {}
        if arrays is None:
            arrays = {}
            for name, f in ARRAY_FIELDS.items():
                path = getattr(args, f.dest, None)
                if not path:
                    continue
                origins[name] = f"{'weights' if name == 'weights' else name.replace('_', ' ')} file {path}"
                if name == "weights":
                    from models.engine.weights import read_weights_file

                    arrays |= {f"weights/{k}": a for k, a in read_weights_file(path).items()}
                else:
                    width = values.get("d_model") if values.get("model") is None else None
                    arrays[name] = load_matrix(path, name.replace("_", " ") if name != "mask" else "mask",
                                               getattr(args, "max_tokens", None), width)
        return cls(**values, arrays=HeldArrays(arrays), origins=tuple(origins.items()))

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

    def _origin(self, name: str, default: str) -> str:
        return dict(self.origins).get(name, default)

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
        request = self.toy_request(complete=False)
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

    # --- what each engine takes ----------------------------------------------------------------
    def toy_request(self, complete: bool = True) -> AttentionRequest:
        """The toy engine's input (arrays checked as a file's would be); InputError when invalid.
        ``complete=False``: weights checked, not completed (no torch: :meth:`validate`)."""
        from models.engine.weights import weights_from_arrays

        if self.uses_model:
            raise InputError("this run traces a pretrained model, not the toy engine")
        embeddings, cross, mask = (self.arrays.get(n) for n in ("embeddings", "cross_embeddings", "mask"))
        if self.sentence is None and embeddings is None:
            raise InputError("give --sentence or --embeddings")
        if self.sentence is not None and embeddings is not None:
            raise InputError("give --sentence or --embeddings, not both")
        if self.cross_sentence is not None and not self.cross_sentence.strip():
            raise InputError("the second sentence (--cross-sentence) is empty: type at least one word")
        if self.cross_sentence is not None and cross is not None:
            raise InputError("give --cross-sentence or --cross-embeddings, not both")
        cfg = self.config().validate()
        if cfg.mask != "custom":
            mask = None
        elif mask is None:
            raise InputError("--mask custom needs --mask-file M.npy (boolean, True = hidden)")
        elif mask.dtype != bool:
            raise InputError(f"{self._origin('mask', 'the mask')} must hold booleans, got {mask.dtype}")
        held = self.arrays.weights()
        where = self._origin("weights", "the weights")
        weights = None if held is None else weights_from_arrays(held, cfg, where, complete)
        return AttentionRequest(
            config=cfg, sentence=self.sentence, embeddings=embeddings, labels=self.labels,
            cross_sentence=self.cross_sentence, cross_embeddings=cross, cross_labels=self.cross_labels,
            weights=weights, custom_mask=mask,
        )  # fmt: skip

    def load_model(self, progress=None):
        from models.pretrained import load_model

        if not self.sentence:
            raise InputError("--model needs --sentence")
        return load_model(self.model, device=self.device, progress=progress, step=self.step, dtype=self.dtype)

    def encdec_options(self, model) -> dict:
        """What ``model.trace`` takes for the target and block (refused for other models)."""
        from models.encdec_options import encdec_options

        return encdec_options(model, self)

    def model_trace(self, model, edits=None, should_stop=None, layer=None, pad_positions=None):
        """``model``'s trace of this spec's layer (``edits``: these instead of the spec's)."""
        return model.trace(
            self.sentence, self.layer if layer is None else layer, mask=self.mask,
            pad_positions=self.pad_positions if pad_positions is None else pad_positions,
            max_tokens=self.max_tokens, edits=self.edits if edits is None else edits, should_stop=should_stop,
            **self.encdec_options(model),
        )  # fmt: skip

    def trace(self):
        """The trace ``main.py export`` writes: the edits applied (never as a difference)."""
        if self.uses_model:
            return self.model_trace(self.load_model())
        from models.engine.edits import apply_edits
        from models.engine.pipeline import run

        return apply_edits(self.toy_request(), self.edits) if self.edits else run(self.toy_request())

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


def _fields() -> list:
    rows = [(f.dest, f.annotation, dataclasses.field(default=f.default)) for f in VALUES]
    return rows + [
        # embeddings, cross_embeddings, mask, weights/W_q …
        ("arrays", HeldArrays, dataclasses.field(default=HeldArrays())),
        ("edits", tuple["Edit", ...], dataclasses.field(default=())),  # what-if edits (models/engine/edits.py)
        ("difference", bool, dataclasses.field(default=False)),  # shown as edited − original
        # Policy, not part of the result (never stored, not compared): a model's layer and pad positions
        # used as given (refused when there is no such layer or token). The window's own inputs are
        # adjusted instead (a layer kept from a deeper model shows the deepest there is).
        ("exact", bool, dataclasses.field(default=True, compare=False)),
        # Where arrays came from, for messages: (("weights", "weights file w.npz"), ...)
        ("origins", tuple[tuple[str, str], ...], dataclasses.field(default=(), compare=False, repr=False)),
    ]


RunSpec = dataclasses.make_dataclass("RunSpec", _fields(), bases=(_RunSpecMethods,), frozen=True)
RunSpec.__module__ = __name__
RunSpec.__doc__ = """ONE frozen description of what to compute; its fields are :data:`VALUES` (one per
row of ``FIELDS``), then ``arrays``, ``edits``, ``difference`` (see the module's docstring)."""

