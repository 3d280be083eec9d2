"""What each engine takes of a :class:`~models.runspec.RunSpec`, and the trace it gives back: the one
mapping of a spec to the toy engine's input (:func:`toy_request`), to a model (:func:`load_model`) and
to its ``trace`` (:func:`model_trace`, export's, the window runner's and ``why``'s), and the trace
``main.py export`` writes (:func:`trace`). A RunSpec itself is data and checks (models/runspec.py);
the traced layer's parameters are models.api.layer_params.
"""

from __future__ import annotations

from models.encdec_options import encdec_options
from models.errors import InputError
from models.request_checks import toy_request as toy_request  # the toy's input: checks, below RunSpec
from models.runspec import RunSpec


def load_model(spec: RunSpec, progress=None):
    """The model ``spec`` traces (its step and device), read from disk."""
    from models.pretrained import load_model as load

    if not spec.sentence:
        raise InputError("--model needs --sentence")
    return load(spec.model, device=spec.device, progress=progress, step=spec.step, dtype=spec.dtype)


def model_trace(spec: RunSpec, model, edits=None, should_stop=None, layer=None, pad_positions=None, encdec=None):
    """``model``'s trace of ``spec``'s layer, the one mapping of a spec to ``model.trace`` (``edits``,
    ``layer``, ``pad_positions``, ``encdec``: these instead of the spec's, the window's adjusted ones)."""
    return model.trace(
        spec.sentence, spec.layer if layer is None else layer, mask=spec.mask,
        pad_positions=spec.pad_positions if pad_positions is None else pad_positions,
        max_tokens=spec.max_tokens, edits=spec.edits if edits is None else edits, should_stop=should_stop,
        **(encdec_options(model, spec) if encdec is None else encdec),
    )  # fmt: skip


def trace(spec: RunSpec):
    """The trace ``main.py export`` writes: the edits applied (never as a difference)."""
    if spec.uses_model:
        return model_trace(spec, load_model(spec))
    from models.engine.edits import apply_edits
    from models.engine.pipeline import run

    return apply_edits(toy_request(spec), spec.edits) if spec.edits else run(toy_request(spec))
