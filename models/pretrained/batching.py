"""Texts of one length run as one batch, each still computed alone: ``torch.func.vmap`` over the
engine's one-text functions, with ``linear`` folded so every number equals the one-by-one run.

The engine is written for one sequence at a time (no batch axis, models/pretrained/common.py). A group
of texts with the same number of tokens needs no padding, so :func:`torch.func.vmap` can run that very
code over a leading batch axis: every text sees only its own tokens, with the same mask, at its own
length. One operation would still change in the last bits: vmap turns ``addmm(b, x, W)`` (what ``linear``
computes, fused) into ``b + x W``; and one product of all the batch's rows (``(B·n, d_in) @ W``) is
not the same either, since the BLAS picks its kernel (and its order of summation) by the number of
rows. Inside :func:`batched`, ``linear`` calls the custom operator below instead, whose batching
rule runs each text's own ``addmm`` at its own shape; everything else (norms, activations, the n×n
stages, the products of q and k, of the weights and v) runs batched. The batched run equals the
one-by-one run within 1e-6 (the tests), mostly bit for bit; the batched q·kᵀ and A·V products may
take another BLAS kernel than one text's, a few 1e-7 apart.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import Tensor

_state = threading.local()  # per thread: the GUI's worker may trace while an atlas runs elsewhere


def in_batch() -> bool:
    """True inside :func:`batched` on this thread: ``linear`` uses :func:`folded_linear`."""
    return getattr(_state, "depth", 0) > 0


@contextlib.contextmanager
def batched() -> Iterator[None]:
    """While inside, ``common.linear`` keeps its fused rounding under ``torch.func.vmap``."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


@torch.library.custom_op("attention_explorer::linear", mutates_args=())
def folded_linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """``x @ w + b`` for ``x (n, d_in)``, ``w (d_in, d_out)``, fused as ``torch.addmm``."""
    return x @ w if b is None else torch.addmm(b, x, w)


@folded_linear.register_fake
def _(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    return x.new_empty(x.shape[0], w.shape[1])


def _per_text_rule(info, in_dims, x: Tensor, w: Tensor, b: Tensor | None):
    """The batching rule: ``x (B, n, d_in)`` -> each text's own ``(n, d_in) @ w`` product."""
    x_dim, w_dim, b_dim = in_dims
    if w_dim is not None or b_dim is not None:  # never in the engine: weights are shared by the batch
        out = torch.func.vmap(lambda xi, wi, bi: xi @ wi if bi is None else torch.addmm(bi, xi, wi),
                              in_dims=in_dims)(x, w, b)  # fmt: skip
        return out, 0
    if x_dim is None:
        return folded_linear(x, w, b), None
    x = x.movedim(x_dim, 0)  # (B, n, d_in)
    return torch.stack([xi @ w if b is None else torch.addmm(b, xi, w) for xi in x]), 0


torch.library.register_vmap("attention_explorer::linear", _per_text_rule)
