"""Encoder-decoder families (T5, mT5, BART, Marian): the shared shape of their two stacks.

Three kinds of attention, called *blocks* as the command line's ``--block`` does:

- ``encoder``: the source sentence attends to itself (no mask), in every encoder layer;
- ``decoder``: the target sentence attends to itself, causally, in every decoder layer;
- ``cross``: the decoder layer's target rows (queries) attend to the encoder's final output
  (keys and values), right after that layer's self-attention.

A family fills in :class:`EncoderDecoder`: its embeddings, where the attention reads its input
(a pre-norm, or the hidden state itself), what follows the attention (residual, post-norm) and its
feed-forward sublayer. Both stacks' layers live in ONE :class:`LayerStore`: index ``i`` is encoder
layer i, index ``encoder_layers + i`` decoder layer i, so a big checkpoint reads each only when used.

Attention follows :class:`EncDecParams`: ``scores = q kᵀ`` (q from the query rows, k and v from
the key rows), ``scaled = scores · scale`` (no such stage when scale is 1, as in T5),
``biased = scaled + B`` (T5's relative position bias), ``masked``, ``weights = softmax``,
``head_output = weights · v``, ``concat``, ``output = concat W_o + b_o``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch import Tensor

from models.checks import short
from models.config import InputError
from models.engine import attention as att
from models.engine.attend import Variant, attend
from models.pretrained.architecture import Wiring
from models.pretrained.batching import in_batch
from models.pretrained.checkpoint import Weights
from models.pretrained.common import AttentionParams, linear, split_heads
from models.pretrained.layer_store import LayerStore

BLOCKS = ("encoder", "decoder", "cross")
DEFAULT_BLOCK = "cross"


def check_block(block: object) -> str:
    if block not in BLOCKS:
        raise InputError(f"unknown block {short(block)}; choose one of {', '.join(BLOCKS)}")
    return block  # type: ignore[return-value]


@dataclass
class EncDecParams(AttentionParams):
    """:class:`AttentionParams` plus an additive score bias ``(h, n_q, n_k)`` (T5), applied after
    the scale and before the mask."""

    bias: Tensor | None = None

    def variant(self, causal: bool = False, pads: tuple[int, ...] = (), n: int | None = None) -> Variant:
        """:meth:`AttentionParams.variant` with the position bias."""
        return replace(super().variant(causal, pads, n), bias=self.bias)


def block_attention(
    x_q: Tensor, x_kv: Tensor, p: EncDecParams, hidden: Tensor, record: dict[str, Tensor] | None = None
) -> Tensor:
    """Attention of the rows ``x_q (n_q, d)`` over ``x_kv (n_k, d)`` (the same tensor for self-
    attention); ``hidden (n_q, n_k)`` True = masked. Returns ``(n_q, d)``; ``record`` gets q, k, v
    and, when asked for, the later stages under their names."""
    q = split_heads(linear(x_q, p.w_q, p.b_q), p.heads)  # (h, n_q, d_k)
    k = split_heads(linear(x_kv, p.w_k, p.b_k), p.kv_heads)  # (h, n_k, d_k)
    v = split_heads(linear(x_kv, p.w_v, p.b_v), p.kv_heads)  # (h, n_k, d_k)
    if record is not None:
        record.update(q=q, k=k, v=v)
    head_output, weights = attend(q, k, v, p.variant(), hidden=hidden if bool(hidden.any()) else None,
                                  eager=not in_batch())  # (h, n_q, d_k), (h, n_q, n_k)
    concat = att.concat_heads(head_output)  # (n_q, h·d_k)
    output = linear(concat, p.w_o, p.b_o)  # (n_q, d)
    if record is not None:
        record.update(weights=weights, output=output)
    return output


class EncoderDecoder:
    """What the encoder-decoder engine needs from one family (see the module docstring).

    Subclasses set the class attributes, read their config into the sizes below and implement
    :meth:`load_layer`, :meth:`embed`, :meth:`attention_input`, :meth:`after_attention`,
    :meth:`feed_forward` and :meth:`params`.
    """

    model_type = ""
    anchor = ""  # the embedding matrix's key (the base model's prefix precedes it)
    encoder_decoder = True
    default_mask = "padding"  # the encoder's; the decoder block is causal
    pe = "learned"  # "relative" (T5), "learned" (BART), "sinusoidal" (Marian)
    input_formula = {"encoder": "X = h_L", "decoder": "X = h_L", "cross": "X_q = h'_L"}
    input_description = {"encoder": "The encoder's hidden state entering this layer.",
                         "decoder": "The decoder's hidden state entering this layer.",
                         "cross": "The decoder's hidden state after this layer's self-attention."}  # fmt: skip
    key_description = "The encoder's final output (the same for every decoder layer)."
    # the residual stream's wiring (``why``): "add" (pre-norm, T5) or "post" (BART); None: not known
    wiring: Wiring | None = None

    encoder_layers: int
    decoder_layers: int
    num_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    target_vocab_size: int
    max_positions: int
    layers: LayerStore  # encoder layers, then decoder layers

    @property
    def num_layers(self) -> int:
        """Stored blocks of both stacks (the loader reads them all when the checkpoint is small)."""
        return self.encoder_layers + self.decoder_layers

    num_kv_heads = property(lambda self: self.num_heads)

    def stack_layers(self, block: str) -> int:
        return self.encoder_layers if block == "encoder" else self.decoder_layers

    def layer(self, block: str, i: int) -> dict:
        return self.layers[i if block == "encoder" else self.encoder_layers + i]

    def load_layer(self, i: int, w: Weights) -> dict:
        raise NotImplementedError

    def embed(self, side: str, ids: Tensor) -> Tensor:
        """``side`` "encoder" or "decoder": token ids ``(n,)`` -> the state entering layer 0."""
        raise NotImplementedError

    def attention_input(self, block: str, i: int, h: Tensor) -> Tensor:
        """What the attention's queries are projected from (a pre-norm of ``h``, or ``h``)."""
        return h

    def after_attention(self, block: str, i: int, h: Tensor, out: Tensor) -> Tensor:
        """The sublayer's result from its input ``h`` and the attention's output."""
        raise NotImplementedError

    def feed_forward(self, side: str, i: int, h: Tensor) -> Tensor:
        raise NotImplementedError

    def params(self, block: str, i: int, n_q: int, n_k: int) -> EncDecParams:
        raise NotImplementedError

    def encoder_final(self, h: Tensor) -> Tensor:
        """The encoder's output from its last layer's (T5: a final norm; BART: itself)."""
        return h

    def decoder_final(self, h: Tensor) -> Tensor:
        return h

    def linear_params(self, L: dict, prefix: str, *, scale: float, formula: str, bias=None) -> EncDecParams:
        """EncDecParams from ``L[prefix + "q"]`` ... ``L[prefix + "o"]`` (weight, bias) pairs."""
        return EncDecParams(
            *L[prefix + "q"], *L[prefix + "k"], *L[prefix + "v"], *L[prefix + "o"],
            heads=self.num_heads, kv_heads=self.num_heads, d_k=self.head_dim, scale=scale,
            scale_formula=formula, bias=bias,
        )  # fmt: skip

    # --- running ---------------------------------------------------------------------------------
    def sublayer(self, block: str, i: int, h: Tensor, hidden: Tensor, memory: Tensor | None = None) -> Tensor:
        """One attention sublayer of layer ``i``: self-attention, or cross-attention over ``memory``."""
        x = self.attention_input(block, i, h)
        kv = x if memory is None else memory
        out = block_attention(x, kv, self.params(block, i, x.shape[0], kv.shape[0]), hidden)
        return self.after_attention(block, i, h, out)

    def encoder_block(self, i: int, h: Tensor, hidden: Tensor) -> Tensor:
        return self.feed_forward("encoder", i, self.sublayer("encoder", i, h, hidden))

    def decoder_self(self, i: int, h: Tensor, hidden: Tensor) -> Tensor:
        return self.sublayer("decoder", i, h, hidden)

    def decoder_rest(self, i: int, h: Tensor, memory: Tensor, cross_hidden: Tensor) -> Tensor:
        """The rest of decoder layer ``i`` after its self-attention: cross-attention, feed-forward."""
        return self.feed_forward("decoder", i, self.sublayer("cross", i, h, cross_hidden, memory))


def take_linear(w: Weights, name: str, n_in: int, n_out: int, bias: bool) -> tuple[Tensor, Tensor | None]:
    """An nn.Linear stored (out, in) as right-multiplication (in, out) (a view, no copy)."""
    weight = w.take(name + ".weight", n_out, n_in).t()
    return weight, (w.take(name + ".bias", n_out) if bias else None)


def take_first(w: Weights, names: tuple[str, ...], *shape: int) -> Tensor:
    """The first of ``names`` the checkpoint holds (tied embeddings are saved under one name)."""
    for name in names:
        if name in w:
            return w.take(name, *shape)
    return w.take(names[0], *shape)  # the one-line error names the first
