"""A loaded pretrained model: tokenize a sentence, run its layers for real, trace one layer.

The hidden states of the last sentence are cached per layer, so stepping from layer to layer
in the GUI only runs the blocks not computed yet. All work happens under ``torch.no_grad()`` on the
model's device, in float32 (the blocks below the traced layer: in the model's ``--dtype``, the
traced layer always in float32); traces hold numpy copies.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from models.config import DEFAULT_MAX_TOKENS, Cancelled, InputError
from models.engine import attention as att
from models.engine.finite import check_recorded
from models.engine.host import to_numpy
from models.engine.trace import AttentionTrace
from models.memory import check_memory, estimate_pretrained_peak
from models.pretrained.architecture import Architecture
from models.pretrained.common import MASK_MODES, attention, hidden_mask, layer_mask, project_qkv
from models.pretrained.edits import LayerEdits, layer_shapes
from models.pretrained.layer_store import dtype_name
from models.pretrained.stages import build_trace
from models.pretrained.tokenizer import Encoded, ModelTokenizer
from models.pretrained.trained_length import length_notice

StopCheck = Callable[[], bool]


class PretrainedModel:
    """One model, ready to trace. Create it with :func:`models.pretrained.load_model`."""

    def __init__(
        self,
        name: str,
        path: Path,
        arch: Architecture,
        tokenizer: ModelTokenizer,
        device: torch.device,
        device_label: str = "cpu",
        notices: list[str] | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.arch = arch
        self.tokenizer = tokenizer
        self.device = device
        self.device_label = device_label  # e.g. "cpu" or "cuda:0 (NVIDIA A100)"
        self.notices = list(notices or [])  # load-time notes (CPU fallback) for every trace
        self.load_ms = 0.0
        # progress(fraction, message) while a trace reads layers not in memory (big checkpoints)
        self.progress: Callable[[float, str], None] = lambda fraction, message: None
        self._lock = threading.Lock()
        self._cache_key: tuple | None = None
        self._states: list[Tensor] = []  # [embeddings, output of block 0, 1, ...]

    @property
    def cached_states(self) -> tuple[Tensor, ...]:
        """The hidden states kept from the last sentence: embeddings, then each block's output."""
        return tuple(self._states)

    # --- description -----------------------------------------------------------------------
    model_type = property(lambda self: self.arch.model_type)
    num_layers = property(lambda self: self.arch.num_layers)
    num_heads = property(lambda self: self.arch.num_heads)
    num_kv_heads = property(lambda self: self.arch.num_kv_heads)
    head_dim = property(lambda self: self.arch.head_dim)
    hidden_size = property(lambda self: self.arch.hidden_size)
    max_positions = property(lambda self: self.arch.max_positions)
    default_mask = property(lambda self: self.arch.default_mask)  # "padding" or "causal"
    dtype = property(lambda self: dtype_name(self.arch.layers.dtype))  # --dtype: "float32", "bfloat16", ...

    def __repr__(self) -> str:
        return (
            f"PretrainedModel({self.name!r}, {self.model_type}, layers={self.num_layers}, "
            f"heads={self.num_heads}, kv_heads={self.num_kv_heads}, d_model={self.hidden_size})"
        )

    # --- tokens ----------------------------------------------------------------------------
    def encode(self, sentence: str, max_tokens: int | None = None) -> Encoded:
        """Tokens, ids and truncation notices, at most ``min(max_positions, max_tokens)``."""
        limit = max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS
        if limit < self.max_positions:
            enc = self.tokenizer.encode(sentence, limit, "the token limit")
        else:
            enc = self.tokenizer.encode(
                sentence, self.max_positions, f"{self.name}'s maximum (max positions)"
            )
        bad = [i for i in enc.ids if i >= self.arch.vocab_size]
        if bad:
            raise InputError(
                f"tokenizer.json produced token id {bad[0]} but the model has only "
                f"{self.arch.vocab_size} embeddings; tokenizer and weights do not match"
            )
        return enc

    def encode_ids(self, ids) -> Encoded:
        """Token ids chosen by the caller (special tokens included), as :meth:`encode` returns them."""
        ids = tuple(int(i) for i in ids)
        if not ids or min(ids) < 0 or max(ids) >= self.arch.vocab_size or len(ids) > self.max_positions:
            raise InputError(f"{len(ids)} token ids outside 0..{self.arch.vocab_size - 1} or longer than "
                             f"{self.name}'s {self.max_positions} positions")  # fmt: skip
        tok = self.tokenizer.tokenizer
        return Encoded(tuple(tok.id_to_token(i) or f"#{i}" for i in ids), ids, (0,) * len(ids))

    def tokenize(self, sentence: str) -> tuple[list[str], list[int]]:
        """The tokens (as the axes show them) and ids the model reads, special tokens included."""
        enc = self.encode(sentence)
        return list(enc.tokens), list(enc.ids)

    # --- running the layers ----------------------------------------------------------------
    def _states_upto(
        self, enc: Encoded, hidden: Tensor, key: tuple, upto: int, should_stop: StopCheck | None
    ) -> list[Tensor]:
        """The hidden states entering blocks 0..upto (``upto == num_layers``: after the last)."""
        with self._lock:
            if self._cache_key != key:
                ids = torch.tensor(enc.ids, dtype=torch.long, device=self.device)
                types = torch.tensor(enc.type_ids, dtype=torch.long, device=self.device)
                self._cache_key, self._states = key, [self.arch.embed(ids, types)]
            states = self._states
            while len(states) <= upto:
                if should_stop is not None and should_stop():
                    raise Cancelled(f"stopped before layer {len(states) - 1}")
                with self.arch.layers.computing():  # in --dtype (float32: as ever)
                    states.append(self.arch.block(len(states) - 1, states[-1], hidden).float())
            return states[: upto + 1]

    def _reading(self, key: tuple, upto: int, should_stop: StopCheck | None):
        """Progress in bytes for the layers that reaching layer ``upto`` will read."""
        start = len(self._states) - 1 if self._cache_key == key and self._states else 0
        last = min(upto, self.num_layers - 1)
        return self.arch.layers.reading(range(start, last + 1), self.progress, should_stop)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache_key, self._states = None, []

    def _mask(
        self, mask: str | None, pad_positions, n: int
    ) -> tuple[str, tuple[int, ...], list[str]]:
        mode = self.default_mask if mask is None else mask
        if mode not in MASK_MODES:
            raise InputError(f"unknown mask {mode!r}; choose one of {', '.join(MASK_MODES)}")
        try:
            pads = tuple(sorted({operator.index(p) for p in pad_positions}))
        except TypeError as e:
            raise InputError(f"pad positions must be integers, got {pad_positions!r}") from e
        for p in pads:
            if not 0 <= p < n:
                raise InputError(f"pad position {p} is outside the {n} tokens (0..{n - 1})")
        notices = []
        if mode != self.default_mask:
            notices.append(
                f"Mask '{mode}' replaces {self.name}'s own '{self.default_mask}' mask in every "
                f"layer, so the hidden states differ from what the model normally computes."
            )
        if pads and mode == "none":
            notices.append("Pad positions are ignored with mask 'none'.")
            pads = ()
        longer = length_notice(self.path, n)  # a trained model's own training length (training.json)
        return mode, pads, notices + ([longer] if longer else [])

    def _check_layer(self, layer: int) -> int:
        try:
            if isinstance(layer, bool):
                raise TypeError
            layer = operator.index(layer)
        except TypeError as e:
            raise InputError(f"layer must be an integer, got {layer!r}") from e
        if not 0 <= layer < self.num_layers:
            raise InputError(
                f"layer {layer} is out of range: {self.name} has {self.num_layers} layers "
                f"(0..{self.num_layers - 1})"
            )
        return layer

    # --- public ----------------------------------------------------------------------------
    def trace(
        self,
        sentence: str,
        layer: int,
        mask: str | None = None,
        pad_positions=(),
        should_stop: StopCheck | None = None,
        max_tokens: int | None = None,
        edits=(),
    ) -> AttentionTrace:
        """Run blocks 0..layer-1 for real and trace the attention of block ``layer``.

        ``mask``: None for the model's own ("padding" for encoders, "causal" for decoders), or
        "none" / "causal" / "padding" to compare; the choice applies to every layer.
        ``pad_positions`` are key positions hidden as padding (by "padding" and "causal").
        ``should_stop()`` is polled between layers; True raises :class:`Cancelled`.
        ``edits``: what-if edits of this layer's stages (:mod:`models.pretrained.edits`); every
        later stage of the layer follows from them, the layers below do not change.
        """
        start = time.perf_counter()
        layer = self._check_layer(layer)
        enc = self.encode(sentence, max_tokens)
        n = len(enc.ids)
        mode, pads, notices = self._mask(mask, pad_positions, n)
        read = self.arch.layers.bytes_to_read(range(layer + 1))  # a big checkpoint's layers
        check_memory(estimate_pretrained_peak(self.arch, n, layer) + read, f"tracing {n} tokens of {self.name}",
                     fits=lambda m: estimate_pretrained_peak(self.arch, m, layer) + read, most=n,
                     hint="use fewer tokens (--max-tokens) or a lower layer")  # fmt: skip
        with torch.no_grad():
            hidden = layer_mask(n, mode, pads, self.device)
            key = (enc.ids, enc.type_ids, mode, pads)
            with self._reading(key, layer, should_stop):
                h = self._states_upto(enc, hidden, key, layer, should_stop)[-1]
                if should_stop is not None and should_stop():
                    raise Cancelled(f"stopped before tracing layer {layer}")
                x = self.arch.attention_input(layer, h)
                params = self.arch.attention_params(layer, n)
            edited = LayerEdits(edits, layer_shapes(x, params)) if edits else None
            if edited is not None:
                x = edited.override("input", x)
            record: dict[str, Tensor] = {}
            # the n×n stages are computed when looked at (models.engine.pairs)
            try:
                project_qkv(x, params, record, edited.override if edited is not None else None)
            except InputError as exc:  # a qk-norm's refusal (check_norm_input): name the layer
                raise InputError(f"layer {layer}: {exc}") from None
        return build_trace(
            self,
            enc,
            layer,
            mode,
            pads,
            x,
            params,
            record,
            notices=self.notices + list(enc.notices) + notices,
            device=self.device_label,
            elapsed_ms=(time.perf_counter() - start) * 1000,
            edits=edited,
        )

    def layer_weights(
        self,
        sentence: str | Encoded,
        mask: str | None = None,
        pad_positions=(),
        should_stop: StopCheck | None = None,
        max_tokens: int | None = None,
        on_layer: Callable[[int, np.ndarray], None] | None = None,
        out: np.ndarray | None = None,
        weighted: bool = False,
    ) -> tuple[Encoded, np.ndarray, list[str]]:
        """Every layer's attention weights in one forward pass: ``(encoded, (L, h, n, n), notices)``.

        Each block runs once (the cached hidden states of :meth:`trace`); the weights of block l
        are recorded by :func:`attention` on the very input that block reads, and written to
        ``out[l]`` (a preallocated or memory-mapped array; float32 otherwise) before
        ``on_layer(l, weights_l)`` is called, so a view can paint layers as they arrive.
        ``sentence``: a text, or token ids already :meth:`encoded <encode_ids>` (the detectors' probes).
        ``weighted``: the weighted norms ‖α_ij f_h(x_j)‖ instead of the weights (models.engine.attention).
        """
        enc = sentence if isinstance(sentence, Encoded) else self.encode(sentence, max_tokens)
        n = len(enc.ids)
        mode, pads, notices = self._mask(mask, pad_positions, n)
        shape = (self.num_layers, self.num_heads, n, n)
        if out is None:
            out = np.empty(shape, dtype=np.float32)
        elif out.shape != shape:
            raise InputError(f"output array has shape {out.shape}, expected {shape}")
        with torch.no_grad():
            hidden = hidden_mask(n, mode, pads, self.device)
            key = (enc.ids, enc.type_ids, mode, pads)
            for layer in range(self.num_layers):
                h = self._states_upto(enc, hidden, key, layer, should_stop)[-1]  # runs block l-1 only
                if should_stop is not None and should_stop():
                    raise Cancelled(f"stopped before layer {layer}")
                record: dict[str, Tensor] = {}
                x = self.arch.attention_input(layer, h)
                if not bool(torch.isfinite(x).all()):
                    source = f"the output of layer {layer - 1}" if layer else "the embeddings"
                    raise InputError(f"the input of layer {layer} ({source}) overflows float32: the model's "
                                     f"weights are too large")  # fmt: skip
                params = self.arch.attention_params(layer, n)
                attention(x, params, hidden, record=record)
                check_recorded(record, f"layer {layer}")  # never a NaN in a file or on screen
                a = record["weights"][..., :n]  # (h, n, n): the real keys' (a learned sink's column left out)
                if weighted:
                    a = att.weighted_norms(a, att.value_norms(record["v"], params.w_o, params.head_groups))
                out[layer] = to_numpy(a)
                if on_layer is not None:
                    on_layer(layer, out[layer])
        return enc, out, self.notices + list(enc.notices) + notices

    def hidden_states(
        self, sentence: str, mask: str | None = None, pad_positions=()
    ) -> list[np.ndarray]:
        """``num_layers + 1`` arrays ``(n, d_model)``, like transformers' ``hidden_states``:
        the embeddings, then each block's output; the last one after the final norm (decoders),
        i.e. equal to ``last_hidden_state``."""
        enc = self.encode(sentence)
        n = len(enc.ids)
        mode, pads, _ = self._mask(mask, pad_positions, n)
        with torch.no_grad():
            hidden = layer_mask(n, mode, pads, self.device)
            key = (enc.ids, enc.type_ids, mode, pads)
            with self._reading(key, self.num_layers, None):
                states = self._states_upto(enc, hidden, key, self.num_layers, None)
            states[-1] = self.arch.final(states[-1])
            return [to_numpy(s).copy() for s in states]
