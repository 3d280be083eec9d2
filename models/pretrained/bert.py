"""BERT-family encoders (model_type "bert"), e.g. all-MiniLM-L6-v2.

Post-norm blocks: ``a = LN(h + Attn(h))``, ``h' = LN(a + FFN(a))``. The attention therefore reads
the previous block's output directly. Embeddings: ``LN(word + token_type + position)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_float, config_str
from models.config import InputError
from models.pretrained.common import (
    Architecture,
    AttentionParams,
    Weights,
    activation,
    attention,
    config_int,
    layer_norm,
    linear,
)


class Bert(Architecture):
    model_type = "bert"
    default_mask = "padding"
    input_formula = "X = h_L"
    input_description = (
        "The true hidden state entering this layer: the previous layer's output "
        "(the embeddings for layer 0)."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        pe = config_str(cfg, "position_embedding_type", "absolute")
        if pe != "absolute":
            raise InputError(f"unsupported BERT position_embedding_type {pe!r}; only 'absolute'")
        d = self.hidden_size = config_int(cfg, "hidden_size")
        h = self.num_heads = self.num_kv_heads = config_int(cfg, "num_attention_heads")
        if d % h:
            raise InputError(f"config.json: hidden_size={d} is not divisible by {h} heads")
        self.head_dim = d // h
        self.num_layers = config_int(cfg, "num_hidden_layers")
        self.max_positions = config_int(cfg, "max_position_embeddings")
        self.vocab_size = config_int(cfg, "vocab_size")
        types = config_int(cfg, "type_vocab_size", default=2)
        ffn = config_int(cfg, "intermediate_size", default=4 * d)
        self.eps = config_float(cfg, "layer_norm_eps", 1e-12)
        self.act = activation(config_str(cfg, "hidden_act", "gelu"))

        self.word = w.take("embeddings.word_embeddings.weight", self.vocab_size, d)
        self.position = w.take("embeddings.position_embeddings.weight", self.max_positions, d)
        self.token_type = w.take("embeddings.token_type_embeddings.weight", types, d)
        self.emb_ln = (
            w.take("embeddings.LayerNorm.weight", d),
            w.take("embeddings.LayerNorm.bias", d),
        )
        self.layers = []
        for i in range(self.num_layers):
            p = f"encoder.layer.{i}."

            def lin(name: str, n_in: int, n_out: int, p: str = p) -> tuple[Tensor, Tensor]:
                # nn.Linear stores (out, in); .t() is a view, so x @ W matches F.linear exactly
                weight = w.take(p + name + ".weight", n_out, n_in).t()
                return weight, w.take(p + name + ".bias", n_out)

            def ln(name: str, p: str = p) -> tuple[Tensor, Tensor]:
                return w.take(p + name + ".weight", d), w.take(p + name + ".bias", d)

            self.layers.append(
                {
                    "q": lin("attention.self.query", d, d),
                    "k": lin("attention.self.key", d, d),
                    "v": lin("attention.self.value", d, d),
                    "o": lin("attention.output.dense", d, d),
                    "ln_attn": ln("attention.output.LayerNorm"),
                    "ffn_in": lin("intermediate.dense", d, ffn),
                    "ffn_out": lin("output.dense", ffn, d),
                    "ln_out": ln("output.LayerNorm"),
                }
            )

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        pos = torch.arange(ids.shape[0], device=ids.device)
        x = self.word[ids] + self.token_type[type_ids]
        x = x + self.position[pos]  # (n, d)
        return layer_norm(x, *self.emb_ln, self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        return AttentionParams(
            *L["q"],
            *L["k"],
            *L["v"],
            *L["o"],
            heads=self.num_heads,
            kv_heads=self.num_kv_heads,
            d_k=self.head_dim,
            scale=self.head_dim**-0.5,
            scale_formula="S / √d_k",
        )

    def block(self, i: int, h: Tensor, hidden: Tensor) -> Tensor:
        L = self.layers[i]
        a = attention(h, self.attention_params(i, h.shape[0]), hidden)
        a = layer_norm(a + h, *L["ln_attn"], self.eps)
        f = linear(self.act(linear(a, *L["ffn_in"])), *L["ffn_out"])
        return layer_norm(f + a, *L["ln_out"], self.eps)
