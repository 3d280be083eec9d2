"""What a toy request is checked for before it runs, without a file read or a torch call
(:meth:`models.runspec.RunSpec.validate`): its sequences' lengths, its pad positions and custom mask
against them, and its edits against the stages' shapes (known from the sizes alone). The same
messages as the pipeline's, which checks them again when it runs."""

from __future__ import annotations

from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine.tokenize import check_embeddings, tokens_or_error


def sequence_length(req: AttentionRequest, cross: bool) -> int:
    """The number of keys (``cross`` False) or of the second sequence's queries, checked as the
    pipeline's ``sequence_of`` checks them (a sentence's tokens, an embeddings matrix's rows)."""
    matrix = req.cross_embeddings if cross else req.embeddings
    labels = req.cross_labels if cross else req.labels
    what = "query embeddings" if cross else "embeddings"
    if matrix is not None:
        n = check_embeddings(matrix, req.config.d_model, req.config.max_tokens, what).shape[0]
        if labels is not None and len(labels) != n:
            raise InputError(f"{len(labels)} labels given for {n} rows of {what}")
        return n
    sentence = req.cross_sentence if cross else req.sentence
    return len(tokens_or_error(sentence, req.config.max_tokens, "second sentence" if cross else "sentence"))


def check_toy_request(req: AttentionRequest) -> tuple[int, int]:
    """``(n_q, n_k)`` of a toy request whose sequences, pad positions and custom mask fit."""
    n_k = sequence_length(req, cross=False)
    n_q = sequence_length(req, cross=True) if req.is_cross else n_k
    cfg = req.config
    if cfg.mask == "padding" and (bad := [p for p in cfg.pad_positions if p >= n_k]):
        raise InputError(f"pad position(s) {bad} out of range: there are {n_k} keys (0..{n_k - 1})")
    if cfg.mask == "custom" and req.custom_mask is not None and req.custom_mask.shape != (n_q, n_k):
        raise InputError(f"custom mask has shape {req.custom_mask.shape}, expected ({n_q}, {n_k})")
    return n_q, n_k


def toy_edit_shapes(cfg: AttentionConfig, n_q: int, n_k: int, cross: bool) -> dict[str, tuple[int, ...]]:
    """The shapes of the toy's editable stages (models/engine/edits.py: ``edit_shapes`` of its trace)."""
    h, d, dk, dv = cfg.heads, cfg.d_model, cfg.head_dim_k, cfg.head_dim_v
    shapes = {"embeddings": (n_k, d), "input": (n_k, d), "q": (h, n_q, dk), "k": (h, n_k, dk), "v": (h, n_k, dv),
              "scores": (h, n_q, n_k), "mask": (n_q, n_k)}  # fmt: skip
    return shapes | ({"query_input": (n_q, d)} if cross else {})


def toy_request(spec, complete: bool = True) -> AttentionRequest:
    """The toy engine's input from a :class:`~models.runspec.RunSpec` (arrays checked as a file's would be);
    InputError when invalid. Here, below RunSpec (whose ``validate`` calls it), so that neither imports the other.
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
