"""A computed run's request as a session run (models/session.py): the options ``main.py export``
would take for it, its matrices as arrays. Qt-free.

The pinned run is saved from the request that made its trace (a trace always carries it), never
from the inputs on screen, which may have changed since it was pinned.
"""

from __future__ import annotations

from models.config import AttentionConfig, AttentionRequest, InputError
from models.edits import Edit
from models.pretrained.registry import is_encoder_decoder
from models.session import Run

from .edited_runner import EditedRequest
from .pretrained_runner import EditedModelRequest, PretrainedRequest

_WEIGHTS = ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")


def run_from_request(request) -> tuple[Run, tuple[Edit, ...], bool]:
    """``(run, edits, difference)`` of a request the worker ran."""
    if isinstance(request, EditedRequest):
        run, _, _ = run_from_request(request.base)
        return run, tuple(request.edits), request.difference
    if isinstance(request, PretrainedRequest):
        options = {"--model": request.model, "--layer": request.layer, "--sentence": request.sentence}
        if request.mask is not None:
            options["--mask"] = request.mask
        if request.pad_positions:
            options["--pad-positions"] = list(request.pad_positions)
        if request.cross_sentence is not None and is_encoder_decoder(request.model):  # its target and block
            options |= {"--cross-sentence": request.cross_sentence, "--block": request.block}
        if isinstance(request, EditedModelRequest):  # a model's layer with what-if edits
            return Run(options), tuple(request.edits), request.difference
        return Run(options), (), False
    if isinstance(request, AttentionRequest):
        return _toy_run(request), (), False
    raise InputError(f"cannot save a run of {type(request).__name__}")


def _toy_run(request: AttentionRequest) -> Run:
    options, arrays = _config_options(request.config), {}
    if request.embeddings is not None:
        arrays["embeddings"] = request.embeddings
    else:
        options["--sentence"] = request.sentence or ""
    if request.labels:
        options["--labels"] = list(request.labels)
    if request.cross_embeddings is not None:
        arrays["cross_embeddings"] = request.cross_embeddings
    elif request.is_cross:
        options["--cross-sentence"] = request.cross_sentence
    if request.cross_labels:
        options["--cross-labels"] = list(request.cross_labels)
    if request.custom_mask is not None:
        arrays["mask"] = request.custom_mask
    w = request.weights
    if w is not None:  # as completed when read (W_o and score parameters filled in): the same numbers again
        arrays |= {f"weights/{k}": getattr(w, k) for k in _WEIGHTS if getattr(w, k) is not None}
        arrays |= {f"weights/{k}": a for k, a in w.extra.items()}
    return Run(options, arrays)


def _config_options(c: AttentionConfig) -> dict:
    options = {"--heads": c.heads, "--d-model": c.d_model, "--mask": c.mask, "--score": c.score, "--pe": c.pe,
               "--temperature": c.temperature, "--seed": c.seed}  # fmt: skip
    options |= {o: v for o, v in (("--d-k", c.d_k), ("--d-v", c.d_v), ("--d-out", c.d_out)) if v is not None}
    if c.pad_positions:
        options["--pad-positions"] = list(c.pad_positions)
    if c.bias:
        options["--bias"] = True
    return options
