"""What every model family provides to the engine (:class:`Architecture`): its sizes, its blocks,
its embedding and its language-model head. One subclass per family in models/pretrained/."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from models.config import InputError
from models.pretrained.checkpoint import Weights
from models.pretrained.common import AttentionParams, attention, config_int
from models.pretrained.layer_store import LayerStore


@dataclass(frozen=True)
class Wiring:
    """How a family's block adds to the residual stream (data on the family class; ``why`` reads it).

    ``add``: ``h + f·attn + mlp`` (pre-norm or parallel), f a multiplier (Granite) or the frozen norm
    after the attention (``post_attn``, Gemma 2/3 and OLMo 2); ``post``: ``LN₂(LN₁(h + attn) + ffn)``
    (BERT, OPT with do_layer_norm_before false)."""

    kind: str  # "add" | "post"
    input_norm: tuple[str, str] | None = None  # (kind, layer key) of the attention's input norm
    post_attn: str | None = None  # layer key of an RMS norm after the attention
    norms: tuple[str, str] = ("", "")  # post: the two LayerNorms' keys
    ffn: tuple[str, str] = ("", "")  # post: the MLP's two linear layers' keys


class Architecture:
    """What the engine needs from one model family. Subclasses fill in the class attributes
    and implement :meth:`embed`, :meth:`attention_params` and :meth:`block`.

    ``anchor`` is the embedding matrix's key: whatever precedes it in the checkpoint ("bert.",
    "model.", ...) is the base model's prefix. ``layers[i]`` is block i's tensors, read from
    disk on first use (a :class:`~models.pretrained.checkpoint.LayerStore`).
    """

    model_type = ""
    anchor = ""
    default_mask = "padding"
    rotary = False
    input_formula = "X = h_L"
    input_description = "The hidden state entering this layer."
    wiring: Wiring | None = None  # the residual stream's wiring (None: not known, ``why`` refuses by name)
    embedding = "embed"  # what h₀ is made of for ``why``: "embed" (one source), "gpt2", "opt", "bert"

    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    max_positions: int
    vocab_size: int
    layers: LayerStore

    def load_layer(self, i: int, w: Weights) -> dict:
        """Block ``i``'s tensors from ``w`` (called on first use, or with meta weights to check)."""
        raise NotImplementedError

    def read_sizes(self, cfg: dict, *, grouped: bool = False) -> tuple[int, int, int]:
        """The sizes the families read alike from config.json (``hidden_size``, ``num_attention_heads``,
        with ``grouped`` also ``num_key_value_heads`` and ``head_dim``, ``num_hidden_layers``,
        ``max_position_embeddings``, ``vocab_size``), checked; returns ``(d_model, heads, d_k)``."""
        d = self.hidden_size = config_int(cfg, "hidden_size")
        h = self.num_heads = config_int(cfg, "num_attention_heads")
        kv = self.num_kv_heads = config_int(cfg, "num_key_value_heads", default=h) if grouped else h
        if h % kv:
            raise InputError(f"config.json: {h} query heads cannot share {kv} key/value heads")
        if d % h and not (grouped and cfg.get("head_dim") is not None):
            raise InputError(f"config.json: hidden_size={d} is not divisible by {h} heads")
        dk = self.head_dim = config_int(cfg, "head_dim", default=d // h) if grouped else d // h
        self.num_layers = config_int(cfg, "num_hidden_layers")
        self.max_positions = config_int(cfg, "max_position_embeddings")
        self.vocab_size = config_int(cfg, "vocab_size")
        return d, h, dk

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        """Token ids ``(n,)`` -> the hidden state entering block 0, ``(n, d_model)``."""
        raise NotImplementedError

    def embed_at(self, ids: Tensor, start: int) -> Tensor:
        """``embed`` of tokens standing at positions ``start, start+1, ...`` (generation feeds
        one new token at a time); families with learned position embeddings override it."""
        return self.embed(ids, torch.zeros_like(ids))

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        """What block ``i``'s attention projects: ``h`` itself, or a pre-norm of it."""
        return h

    def attention_params(self, i: int, n: int) -> AttentionParams:
        raise NotImplementedError

    def layer_params(self, layer: dict, *, scale: float | None = None, scale_formula: str = "S / √d_k",
                     **extra) -> AttentionParams:  # fmt: skip
        """The AttentionParams of a layer whose ``layer`` dict holds (weight, bias) pairs "q", "k",
        "v", "o"; ``scale`` defaults to 1/√d_k; ``extra``: rope, q_norm, softcap, ..."""
        return AttentionParams(
            *layer["q"], *layer["k"], *layer["v"], *layer["o"],
            heads=self.num_heads, kv_heads=self.num_kv_heads, d_k=self.head_dim,
            scale=self.head_dim**-0.5 if scale is None else scale, scale_formula=scale_formula, **extra,
        )  # fmt: skip

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        """Block ``i``: hidden state in, hidden state out, both ``(n, d_model)``; with ``cache``
        (a LayerKV, generation) ``h`` holds only the new tokens (see :func:`attention`)."""
        raise NotImplementedError

    def self_attention(self, i: int, x: Tensor, hidden: Tensor, cache=None) -> Tensor:
        """Block ``i``'s attention of ``x`` (what it projects, ``(n, d_model)``): the one attention
        function with the layer's params; with ``cache`` (generation) ``x`` holds the new tokens only
        and the rotary table covers the cached positions too. Every family's block calls this."""
        return attention(x, self.attention_params(i, context_length(x, cache)), hidden, cache=cache)

    def final(self, h: Tensor) -> Tensor:
        """The final norm after the last block (decoders); identity for BERT."""
        return h

    # --- the language-model head (generation, logit lens: models/generate) ------------------
    lm_head_key = "lm_head.weight"  # the unembedding's key in a checkpoint with its own head
    tied_default = False  # tie_word_embeddings when config.json does not say
    final_logit_softcap: float | None = None  # Gemma 2: logits <- c·tanh(logits / c)
    logits_scaling: float = 1.0  # Granite: logits <- logits / logits_scaling
    logit_scale: float = 1.0  # Cohere: logits <- logits · logit_scale
    lm_head_bias_key: str | None = None  # Phi: the head's own bias

    def input_embeddings(self) -> Tensor:
        """The token embedding matrix ``(vocab, d_model)`` as held (maybe bf16), which a tied
        head reads as its unembedding."""
        raise NotImplementedError


def context_length(h: Tensor, cache) -> int:
    """The positions a block's attention covers: the new tokens plus those cached before."""
    return h.shape[0] + (0 if cache is None else cache.length)
