"""A loaded encoder-decoder model: a source and a target sentence, one forward pass, three blocks.

The source sentence (``--sentence``) is the encoder's input; the target (``--cross-sentence``) is
the decoder's, as its token ids exactly as the tokenizer encodes it (special tokens included, no
decoder start token prepended), as BertViz does. Encoder states are cached per source, decoder
states per (source, target), so moving between layers and blocks only runs what is missing.
Masks are the model's own (none in the encoder and the cross attention, causal in the decoder).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from models.config import DEFAULT_MAX_TOKENS, Cancelled, InputError
from models.engine.finite import check_recorded
from models.engine.host import to_numpy
from models.engine.trace import AttentionTrace
from models.memory import check_memory, estimate_encdec_peak
from models.pretrained.common import hidden_mask
from models.pretrained.encdec import BLOCKS, DEFAULT_BLOCK, EncoderDecoder, block_attention, check_block
from models.pretrained.encdec_trace import build_block_trace
from models.pretrained.tokenizer import Encoded, ModelTokenizer

StopCheck = Callable[[], bool]


class EncoderDecoderModel:
    """One encoder-decoder model, ready to trace. Create it with :func:`models.pretrained.load_model`."""

    encoder_decoder = True
    blocks = BLOCKS

    def __init__(self, name: str, path: Path, arch: EncoderDecoder, tokenizer: ModelTokenizer,
                 device: torch.device, device_label: str = "cpu",
                 notices: list[str] | None = None) -> None:  # fmt: skip
        self.name, self.path, self.arch, self.tokenizer = name, path, arch, tokenizer
        self.device, self.device_label = device, device_label
        self.notices = list(notices or [])
        self.load_ms = 0.0
        self.progress: Callable[[float, str], None] = lambda fraction, message: None
        self._lock = threading.Lock()
        self._enc_key: tuple | None = None
        self._enc: list[Tensor] = []  # [embeddings, output of encoder layer 0, 1, ...]
        self._dec_key: tuple | None = None
        self._dec: list[Tensor] = []  # [embeddings, output of decoder layer 0, 1, ...]
        self._mid: list[Tensor] = []  # decoder layer i's state after its self-attention

    # --- description -------------------------------------------------------------------------------
    model_type = property(lambda self: self.arch.model_type)
    num_heads = property(lambda self: self.arch.num_heads)
    num_kv_heads = property(lambda self: self.arch.num_heads)
    head_dim = property(lambda self: self.arch.head_dim)
    hidden_size = property(lambda self: self.arch.hidden_size)
    max_positions = property(lambda self: self.arch.max_positions)
    default_mask = property(lambda self: self.arch.default_mask)
    # The layers of the default block (cross: one per decoder layer); see block_layers.
    num_layers = property(lambda self: self.arch.decoder_layers)

    def block_layers(self, block: str) -> int:
        return self.arch.stack_layers(check_block(block))

    def __repr__(self) -> str:
        a = self.arch
        return (f"EncoderDecoderModel({self.name!r}, {a.model_type}, encoder_layers={a.encoder_layers}, "
                f"decoder_layers={a.decoder_layers}, heads={a.num_heads}, d_model={a.hidden_size})")  # fmt: skip

    # --- tokens ------------------------------------------------------------------------------------
    def encode(self, sentence: str, max_tokens: int | None = None, side: str = "encoder") -> Encoded:
        limit = max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS
        what = "source" if side == "encoder" else "target"
        if not isinstance(sentence, str) or not sentence.strip():
            raise InputError(f"the {what} sentence is empty; type a few words"
                             + ("" if side == "encoder" else " in --cross-sentence (the target)"))  # fmt: skip
        if limit < self.max_positions:
            enc = self.tokenizer.encode(sentence, limit, "the token limit")
        else:
            enc = self.tokenizer.encode(sentence, self.max_positions, f"{self.name}'s maximum (max positions)")
        vocab = self.arch.vocab_size if side == "encoder" else self.arch.target_vocab_size
        bad = [i for i in enc.ids if i >= vocab]
        if bad:
            raise InputError(f"tokenizer.json produced token id {bad[0]} but the model has only {vocab} "
                             f"embeddings; tokenizer and weights do not match")  # fmt: skip
        return enc

    def tokenize(self, sentence: str) -> tuple[list[str], list[int]]:
        enc = self.encode(sentence)
        return list(enc.tokens), list(enc.ids)

    # --- running -----------------------------------------------------------------------------------
    def _ids(self, enc: Encoded) -> Tensor:
        return torch.tensor(enc.ids, dtype=torch.long, device=self.device)

    def _check_stop(self, should_stop: StopCheck | None, what: str) -> None:
        if should_stop is not None and should_stop():
            raise Cancelled(f"stopped before {what}")

    def _encoder_states(self, src: Encoded, upto: int, should_stop: StopCheck | None) -> list[Tensor]:
        """The states entering encoder layers 0..upto (``upto == encoder_layers``: after the last)."""
        a = self.arch
        if self._enc_key != src.ids:
            self._enc_key, self._enc = src.ids, [a.embed("encoder", self._ids(src))]
            self._dec_key, self._dec, self._mid = None, [], []
        n = len(src.ids)
        free = hidden_mask(n, "none", (), self.device)
        while len(self._enc) <= upto:
            self._check_stop(should_stop, f"encoder layer {len(self._enc) - 1}")
            self._enc.append(a.encoder_block(len(self._enc) - 1, self._enc[-1], free))
        return self._enc[: upto + 1]

    def _memory(self, src: Encoded, should_stop: StopCheck | None) -> Tensor:
        return self.arch.encoder_final(self._encoder_states(src, self.arch.encoder_layers, should_stop)[-1])

    def _decoder_states(self, src: Encoded, tgt: Encoded, upto: int, should_stop: StopCheck | None) -> None:
        """Fill the decoder states entering layers 0..upto and the mid-layer states before them."""
        a = self.arch
        memory = self._memory(src, should_stop)
        key = (src.ids, tgt.ids)
        if self._dec_key != key:
            self._dec_key, self._dec, self._mid = key, [a.embed("decoder", self._ids(tgt))], []
        n_t, n_s = len(tgt.ids), len(src.ids)
        causal = hidden_mask(n_t, "causal", (), self.device)
        free = torch.zeros(n_t, n_s, dtype=torch.bool, device=self.device)
        while len(self._dec) <= upto or len(self._mid) <= min(upto, a.decoder_layers - 1):
            if len(self._mid) < len(self._dec):  # decoder layer i's self-attention
                i = len(self._mid)
                self._check_stop(should_stop, f"decoder layer {i}")
                self._mid.append(a.decoder_self(i, self._dec[i], causal))
            else:  # the rest of layer i: cross attention and feed-forward
                i = len(self._dec) - 1
                self._dec.append(a.decoder_rest(i, self._mid[i], memory, free))

    def clear_cache(self) -> None:
        with self._lock:
            self._enc_key, self._enc, self._dec_key, self._dec, self._mid = None, [], None, [], []

    def _check_layer(self, block: str, layer: int) -> int:
        count = self.block_layers(block)
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
            raise InputError(f"layer must be an integer, got {layer!r}")
        if not 0 <= layer < count:
            raise InputError(f"layer {layer} is out of range: {self.name}'s {block} block has {count} layers "
                             f"(0..{count - 1})")  # fmt: skip
        return int(layer)

    def check_supported(self, mask, pad_positions, edits) -> None:
        """What this engine does not reproduce for encoder-decoders is refused by name."""
        if mask is not None and mask not in ("default",):
            raise InputError(f"{self.model_type} model: only the model's own masks are supported for "
                             f"encoder-decoder models (none in the encoder and cross blocks, causal in the "
                             f"decoder); remove --mask {mask}")  # fmt: skip
        if tuple(pad_positions or ()):
            raise InputError(f"{self.model_type} model: pad positions are not supported for encoder-decoder "
                             "models; remove --pad-positions")  # fmt: skip
        if edits:
            raise InputError(f"{self.model_type} model: what-if edits are not supported for encoder-decoder models")

    def _inputs(self, sentence: str, cross_sentence: str | None, max_tokens: int | None):
        if cross_sentence is None:
            raise InputError(f"{self.name} is an encoder-decoder model: give the target sentence too "
                             "(--cross-sentence); --sentence is the source")  # fmt: skip
        return self.encode(sentence, max_tokens, "encoder"), self.encode(cross_sentence, max_tokens, "decoder")

    def needed_layers(self, block: str, layer: int) -> range | list[int]:
        """The stored blocks (encoder layers, then decoder layers) a trace of ``block`` layer ``layer``
        reads: an encoder layer only the encoder layers up to it; a decoder or cross layer the whole
        encoder and the decoder layers up to it. A big checkpoint reads nothing else."""
        a = self.arch
        if block == "encoder":
            return range(layer + 1)
        return list(range(a.encoder_layers)) + [a.encoder_layers + i for i in range(layer + 1)]

    def _check_memory(self, n_s: int, n_t: int, layers) -> None:
        read = self.arch.layers.bytes_to_read(layers)
        n = max(n_s, n_t)
        check_memory(estimate_encdec_peak(self.arch, n, read), f"tracing {n_s} + {n_t} tokens of {self.name}",
                     fits=lambda m: estimate_encdec_peak(self.arch, m, read), most=n,
                     hint="use shorter source and target sentences (each)")  # fmt: skip

    def _reading(self, layers, should_stop: StopCheck | None):
        """Progress in bytes while the layers not in memory yet are read (big checkpoints)."""
        return self.arch.layers.reading(layers, self.progress, should_stop)

    # --- public ------------------------------------------------------------------------------------
    def trace(self, sentence: str, layer: int, mask: str | None = None, pad_positions=(),
              should_stop: StopCheck | None = None, max_tokens: int | None = None, edits=(), *,
              cross_sentence: str | None = None, block: str = DEFAULT_BLOCK) -> AttentionTrace:  # fmt: skip
        """Run what precedes ``block`` layer ``layer`` for real and trace that attention: the
        encoder's self-attention, the decoder's (causal) self-attention, or the cross attention
        of the decoder's rows over the encoder's output."""
        start = time.perf_counter()
        block = check_block(block)
        self.check_supported(mask, pad_positions, edits)
        layer = self._check_layer(block, layer)
        src, tgt = self._inputs(sentence, cross_sentence, max_tokens)
        a = self.arch
        needed = self.needed_layers(block, layer)
        self._check_memory(len(src.ids), len(tgt.ids), needed)
        with torch.no_grad(), self._lock, self._reading(needed, should_stop):
            if block == "encoder":
                h = self._encoder_states(src, layer, should_stop)[layer]
                x_q = x_kv = a.attention_input("encoder", layer, h)
                q_enc = k_enc = src
            else:
                self._decoder_states(src, tgt, layer, should_stop)
                if block == "decoder":
                    x_q = x_kv = a.attention_input("decoder", layer, self._dec[layer])
                    q_enc = k_enc = tgt
                else:
                    x_q = a.attention_input("cross", layer, self._mid[layer])
                    x_kv = self._memory(src, should_stop)
                    q_enc, k_enc = tgt, src
            self._check_stop(should_stop, f"tracing {block} layer {layer}")
            params = a.params(block, layer, x_q.shape[0], x_kv.shape[0])
        notices = self.notices + list(src.notices) + list(tgt.notices)
        return build_block_trace(self, block, layer, q_enc, k_enc, x_q, x_kv, params, notices=notices,
                                 elapsed_ms=(time.perf_counter() - start) * 1000)  # fmt: skip

    def layer_weights(self, sentence: str, mask: str | None = None, pad_positions=(),
                      should_stop: StopCheck | None = None, max_tokens: int | None = None,
                      on_layer: Callable[[int, np.ndarray], None] | None = None, out: np.ndarray | None = None,
                      *, cross_sentence: str | None = None, block: str = DEFAULT_BLOCK):  # fmt: skip
        """Every layer's weights of one block in one forward pass: ``(query encoded, key encoded,
        (L, h, n_q, n_k), notices)``; ``out`` a preallocated (or memory-mapped) array."""
        block = check_block(block)
        self.check_supported(mask, pad_positions, ())
        src, tgt = self._inputs(sentence, cross_sentence, max_tokens)
        q_enc, k_enc = {"encoder": (src, src), "decoder": (tgt, tgt), "cross": (tgt, src)}[block]
        count = self.block_layers(block)
        shape = (count, self.num_heads, len(q_enc.ids), len(k_enc.ids))
        if out is None:
            out = np.empty(shape, dtype=np.float32)
        elif out.shape != shape:
            raise InputError(f"output array has shape {out.shape}, expected {shape}")
        a = self.arch
        needed = self.needed_layers(block, count - 1)
        self._check_memory(len(src.ids), len(tgt.ids), needed)
        with torch.no_grad(), self._lock, self._reading(needed, should_stop):
            for layer in range(count):
                if block == "encoder":
                    x_q = x_kv = a.attention_input(block, layer, self._encoder_states(src, layer, should_stop)[layer])
                    hidden = torch.zeros(len(src.ids), len(src.ids), dtype=torch.bool, device=self.device)
                else:
                    self._decoder_states(src, tgt, layer, should_stop)
                    if block == "decoder":
                        x_q = x_kv = a.attention_input(block, layer, self._dec[layer])
                        hidden = hidden_mask(len(tgt.ids), "causal", (), self.device)
                    else:
                        x_q, x_kv = a.attention_input(block, layer, self._mid[layer]), self._memory(src, should_stop)
                        hidden = torch.zeros(len(tgt.ids), len(src.ids), dtype=torch.bool, device=self.device)
                record: dict[str, Tensor] = {}
                block_attention(x_q, x_kv, a.params(block, layer, x_q.shape[0], x_kv.shape[0]), hidden, record)
                check_recorded(record, f"{block} layer {layer}")  # never a NaN in a file or on screen (issue 36)
                out[layer] = to_numpy(record["weights"])
                if on_layer is not None:
                    on_layer(layer, out[layer])
        return q_enc, k_enc, out, self.notices + list(src.notices) + list(tgt.notices)

    def hidden_states(self, sentence: str, cross_sentence: str) -> dict[str, list[np.ndarray]]:
        """``{"encoder": [...], "decoder": [...]}``, ``layers + 1`` arrays ``(n, d_model)`` each, like
        transformers' ``encoder_hidden_states`` / ``decoder_hidden_states``: the embeddings, then
        each layer's output, the last one after the stack's final norm (T5)."""
        src, tgt = self._inputs(sentence, cross_sentence, None)
        a = self.arch
        with torch.no_grad(), self._lock, self._reading(range(a.num_layers), None):
            enc = list(self._encoder_states(src, a.encoder_layers, None))
            self._decoder_states(src, tgt, a.decoder_layers, None)
            dec = list(self._dec)
        enc[-1], dec[-1] = a.encoder_final(enc[-1]), a.decoder_final(dec[-1])
        return {side: [to_numpy(s).copy() for s in states]
                for side, states in (("encoder", enc), ("decoder", dec))}  # fmt: skip
