"""Every layer's attention weights of many texts, texts of one length run as one batch.

``batch_layer_weights(model, encs, on_weights)`` groups the encoded texts by their number of tokens
(special tokens included) and runs each group, in batches of at most :func:`batch_size` texts,
through the model's own one-text functions under ``torch.func.vmap`` (models/pretrained/batching.py):
no padding, every text at its own length with the model's own mask, so every number equals
:meth:`PretrainedModel.layer_weights <models.pretrained.model.PretrainedModel.layer_weights>` text by
text (within 1e-6, the tests; mostly bit for bit, see models/pretrained/batching.py). The loop runs
layer by layer over all the batches, so a big checkpoint reads each layer once for all the texts
given, not once per text.

A family whose code cannot run under vmap (data-dependent control flow, e.g. a mixture of experts
routing its tokens) runs the same steps one text at a time, found on its first batch and remembered.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from models.config import Cancelled, InputError
from models.engine.finite import check_recorded
from models.engine.host import to_numpy
from models.memory import F32, MARGIN, check_memory, is_out_of_memory
from models.pretrained.batching import batched
from models.pretrained.common import attention, check_recorded_norms, hidden_mask
from models.pretrained.tokenizer import Encoded

BATCH_BYTES = 128 << 20  # one batch's temporaries (its n×n stages and the block's vectors)
MAX_BATCH = 64
# vmap runs torch's fused CPU attention (the layers' own forward) text by text, as intended
warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet implemented "
                        "the batching rule", category=UserWarning)  # fmt: skip
_ONE_BY_ONE: weakref.WeakSet = weakref.WeakSet()  # architectures vmap cannot run

OnWeights = Callable[[int, Sequence[int], np.ndarray], None]  # layer, indices into encs, (b, h, n, n)


def text_bytes(arch, n: int) -> int:
    """What one text of ``n`` tokens holds while its batch runs one layer: the recorded stages
    (q, k, v, four n×n stages, the head outputs and output) and the block's vectors (MLP)."""
    h, d, dk = arch.num_heads, arch.hidden_size, arch.head_dim
    ffn = getattr(arch, "ffn", None) or 4 * d
    return F32 * (6 * h * n * n + n * (6 * h * dk + 6 * d + 3 * ffn))


def state_bytes(arch, n: int) -> int:
    """The hidden states one text of ``n`` tokens keeps between layers (this layer's and the next)."""
    return 2 * F32 * n * arch.hidden_size


def batch_size(arch, n: int) -> int:
    """How many texts of ``n`` tokens run as one batch: at most :data:`MAX_BATCH`, within :data:`BATCH_BYTES`."""
    return max(1, min(MAX_BATCH, BATCH_BYTES // max(1, text_bytes(arch, n))))


def batches_of(encs: Sequence[Encoded], arch) -> list[list[int]]:
    """Indices into ``encs``, grouped by length (shortest first), each group cut into batches."""
    groups: dict[int, list[int]] = {}
    for i, enc in enumerate(encs):
        groups.setdefault(len(enc.ids), []).append(i)
    out = []
    for n in sorted(groups):
        size, idx = batch_size(arch, n), groups[n]
        out += [idx[s : s + size] for s in range(0, len(idx), size)]
    return out


def _layer_step(arch, layer: int, hidden: Tensor, last: bool) -> Callable[[Tensor], tuple]:
    """One text's layer: ``h (n, d)`` -> (attention input, recorded stages, next hidden state), as
    :meth:`PretrainedModel.layer_weights` computes them (the next state: the block's own output)."""
    n = hidden.shape[-1]
    params = arch.attention_params(layer, n)

    def step(h: Tensor) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        x = arch.attention_input(layer, h)
        record: dict[str, Tensor] = {}
        attention(x, params, hidden, record=record)
        return x, record, h if last else arch.block(layer, h, hidden)

    step.params = params  # type: ignore[attr-defined]  # the recorded q and k are checked against its norms
    return step


def runs_batched(arch) -> bool:
    """False once vmap could not run ``arch`` (it then goes one text at a time)."""
    return arch not in _ONE_BY_ONE


def _run_batch(arch, step, h: Tensor) -> tuple[Tensor, dict[str, Tensor], Tensor]:
    """``step`` over the batch ``h (B, n, d)``: vmapped, or text by text where vmap cannot run it."""
    if arch not in _ONE_BY_ONE:
        try:
            with batched():
                return torch.func.vmap(step)(h)
        except RuntimeError as exc:  # vmap: data-dependent control flow, an operator it cannot batch
            if is_out_of_memory(exc):
                raise
            _ONE_BY_ONE.add(arch)
    outs = [step(h[i]) for i in range(h.shape[0])]
    record = {k: torch.stack([o[1][k] for o in outs]) for k in outs[0][1]}
    return torch.stack([o[0] for o in outs]), record, torch.stack([o[2] for o in outs])


def batch_layer_weights(model, encs: Sequence[Encoded], on_weights: OnWeights,
                        should_stop: Callable[[], bool] | None = None,
                        on_layer: Callable[[int], None] | None = None, on_device: bool = False) -> int:  # fmt: skip
    """Call ``on_weights(layer, indices, weights)`` for every layer and batch of ``encs`` (texts of
    one length, ``weights`` ``(len(indices), h, n, n)`` float32, the real keys' columns), layer by
    layer, and ``on_layer(layer)`` once a layer is done for every text; ``should_stop()`` is polled
    before each batch. Returns the number of batches. ``on_device``: ``weights`` is the tensor on
    the model's device (what reads it there hands the host only its results), not a numpy copy.
    A model that is not a decoder-only or encoder-only PretrainedModel runs text by text."""
    from models.pretrained.model import PretrainedModel

    if not encs:
        return 0
    if not isinstance(model, PretrainedModel):
        for i, enc in enumerate(encs):
            weights = model.layer_weights(enc, should_stop=should_stop)[1]  # numpy (an encoder-decoder's)
            for layer in range(weights.shape[0]):
                on_weights(layer, [i], torch.from_numpy(weights[layer][None]) if on_device else weights[layer][None])
        if on_layer is not None:
            on_layer(model.num_layers - 1)
        return len(encs)
    arch, device = model.arch, model.device
    groups = batches_of(encs, arch)
    needed = sum(state_bytes(arch, len(enc.ids)) for enc in encs) + MARGIN
    needed += max(len(g) * text_bytes(arch, len(encs[g[0]].ids)) for g in groups)
    needed += arch.layers.bytes_to_read(range(arch.num_layers))
    check_memory(needed, f"the attention of {len(encs)} texts of {model.name}", hint="use fewer or shorter texts")
    with torch.no_grad():
        states, masks = [], []
        for g in groups:  # each text embedded alone, as layer_weights does
            n = len(encs[g[0]].ids)
            states.append(torch.stack([arch.embed(torch.tensor(encs[i].ids, dtype=torch.long, device=device),
                                                  torch.tensor(encs[i].type_ids, dtype=torch.long, device=device))
                                       for i in g]))  # fmt: skip
            masks.append(hidden_mask(n, model.default_mask, (), device))
        for layer in range(arch.num_layers):
            last = layer == arch.num_layers - 1
            for b, g in enumerate(groups):
                if should_stop is not None and should_stop():
                    raise Cancelled(f"stopped at layer {layer}")
                step = _layer_step(arch, layer, masks[b], last)
                try:  # a qk-norm's mean square beyond float32: inside a step, or after a vmapped one
                    x, record, states[b] = _run_batch(arch, step, states[b])
                    check_recorded_norms(record, step.params)
                except InputError as exc:
                    raise InputError(f"layer {layer}: {exc}") from None
                if not bool(torch.isfinite(x).all()):
                    source = f"the output of layer {layer - 1}" if layer else "the embeddings"
                    raise InputError(f"the input of layer {layer} ({source}) overflows float32: the model's "
                                     f"weights are too large")  # fmt: skip
                check_recorded(record, f"layer {layer}")
                n = x.shape[1]
                weights = record["weights"][..., :n]  # (b, h, n, n)
                weights = weights if on_device else to_numpy(weights)
                del record, x
                on_weights(layer, g, weights)
            if on_layer is not None:
                on_layer(layer)
    return len(groups)
