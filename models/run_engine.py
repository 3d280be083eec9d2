"""What each engine takes of a :class:`~models.runspec.RunSpec`, and the trace it gives back: the one
mapping of a spec to the toy engine's input (:func:`toy_request`), to a model (:func:`load_model`) and
to its ``trace`` (:func:`model_trace`, export's, the window runner's and ``why``'s), and the trace
``main.py export`` writes (:func:`trace`). A RunSpec itself is data and checks (models/runspec.py);
the traced layer's parameters are models.api.layer_params.
"""

from __future__ import annotations

from models.config import AttentionRequest
from models.encdec_options import encdec_options
from models.errors import InputError
from models.runspec import RunSpec


def toy_request(spec: RunSpec, complete: bool = True) -> AttentionRequest:
    """The toy engine's input (arrays checked as a file's would be); InputError when invalid.
    ``complete=False``: weights checked, not completed (no torch: :meth:`RunSpec.validate`)."""
    from models.engine.weights import weights_from_arrays

    if spec.uses_model:
        raise InputError("this run traces a pretrained model, not the toy engine")
    embeddings, cross, mask = (spec.arrays.get(n) for n in ("embeddings", "cross_embeddings", "mask"))
    if spec.sentence is None and embeddings is None:
        raise InputError("give --sentence or --embeddings")
    if spec.sentence is not None and embeddings is not None:
        raise InputError("give --sentence or --embeddings, not both")
    if spec.cross_sentence is not None and not spec.cross_sentence.strip():
        raise InputError("the second sentence (--cross-sentence) is empty: type at least one word")
    if spec.cross_sentence is not None and cross is not None:
        raise InputError("give --cross-sentence or --cross-embeddings, not both")
    cfg = spec.config().validate()
    origins = dict(spec.origins)
    if cfg.mask != "custom":
        mask = None
    elif mask is None:
        raise InputError("--mask custom needs --mask-file M.npy (boolean, True = hidden)")
    elif mask.dtype != bool:
        raise InputError(f"{origins.get('mask', 'the mask')} must hold booleans, got {mask.dtype}")
    held = spec.arrays.weights()
    weights = None if held is None else weights_from_arrays(held, cfg, origins.get("weights", "the weights"), complete)
    return AttentionRequest(
        config=cfg, sentence=spec.sentence, embeddings=embeddings, labels=spec.labels,
        cross_sentence=spec.cross_sentence, cross_embeddings=cross, cross_labels=spec.cross_labels,
        weights=weights, custom_mask=mask,
    )  # fmt: skip


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
