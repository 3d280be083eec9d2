"""BERT-family encoders: ``bert`` (e.g. all-MiniLM-L6-v2), ``roberta``, ``xlm-roberta`` and
``distilbert``.

Post-norm blocks: ``a = LN(h + Attn(h))``, ``h' = LN(a + FFN(a))``. The attention therefore reads
the previous block's output directly. Embeddings: ``LN(word + token_type + position)``.
RoBERTa (and XLM-R) number positions from ``padding_idx + 1`` (a pad token keeps position
``padding_idx``); DistilBERT has no token types and its own tensor names.
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_float, config_str, short
from models.config import InputError
from models.pretrained.architecture import Architecture, Wiring
from models.pretrained.common import (
    AttentionParams,
    Weights,
    activation,
    config_int,
    layer_norm,
    linear,
)
from models.pretrained.layer_store import LayerStore


class Bert(Architecture):
    model_type = "bert"
    wiring = Wiring("post", norms=("ln_attn", "ln_out"), ffn=("ffn_in", "ffn_out"))  # the residual stream (why)
    embedding = "bert"  # h₀ = LN(word + position [+ type])
    anchor = "embeddings.word_embeddings.weight"
    default_mask = "padding"
    input_formula = "X = h_L"
    input_description = (
        "The true hidden state entering this layer: the previous layer's output "
        "(the embeddings for layer 0)."
    )
    # tensor names of one block, after "encoder.layer.{i}."
    layer_prefix = "encoder.layer.{i}."
    names = {
        "q": "attention.self.query",
        "k": "attention.self.key",
        "v": "attention.self.value",
        "o": "attention.output.dense",
        "ln_attn": "attention.output.LayerNorm",
        "ffn_in": "intermediate.dense",
        "ffn_out": "output.dense",
        "ln_out": "output.LayerNorm",
    }
    token_types = True

    def __init__(self, cfg: dict, w: Weights) -> None:
        pe = config_str(cfg, "position_embedding_type", "absolute")
        if pe not in (None, "absolute"):
            raise InputError(
                f"{self.model_type} model: unsupported position_embedding_type {pe!r}; "
                "supported: absolute"
            )
        self.read_config(cfg)
        d = self.hidden_size
        self.word = w.take("embeddings.word_embeddings.weight", self.vocab_size, d)
        self.position = w.take("embeddings.position_embeddings.weight", self.positions, d)
        if self.token_types:
            types = config_int(cfg, "type_vocab_size", default=2)
            self.token_type = w.take("embeddings.token_type_embeddings.weight", types, d)
        self.emb_ln = (
            w.take("embeddings.LayerNorm.weight", d),
            w.take("embeddings.LayerNorm.bias", d),
        )
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def read_config(self, cfg: dict) -> None:
        d = self.hidden_size = config_int(cfg, "hidden_size")
        h = self.num_heads = self.num_kv_heads = config_int(cfg, "num_attention_heads")
        if d % h:
            raise InputError(f"config.json: hidden_size={d} is not divisible by {h} heads")
        self.head_dim = d // h
        self.num_layers = config_int(cfg, "num_hidden_layers")
        self.positions = self.max_positions = config_int(cfg, "max_position_embeddings")
        self.vocab_size = config_int(cfg, "vocab_size")
        self.ffn = config_int(cfg, "intermediate_size", default=4 * d)
        self.eps = config_float(cfg, "layer_norm_eps", 1e-12)
        self.act = activation(config_str(cfg, "hidden_act", "gelu"))

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d, ffn = self.layer_prefix.format(i=i), self.hidden_size, self.ffn

        def lin(role: str, n_in: int, n_out: int) -> tuple[Tensor, Tensor]:
            # nn.Linear stores (out, in); .t() is a view, so x @ W matches F.linear exactly
            name = p + self.names[role]
            return w.take(name + ".weight", n_out, n_in).t(), w.take(name + ".bias", n_out)

        def ln(role: str) -> tuple[Tensor, Tensor]:
            name = p + self.names[role]
            return w.take(name + ".weight", d), w.take(name + ".bias", d)

        return {
            "q": lin("q", d, d),
            "k": lin("k", d, d),
            "v": lin("v", d, d),
            "o": lin("o", d, d),
            "ln_attn": ln("ln_attn"),
            "ffn_in": lin("ffn_in", d, ffn),
            "ffn_out": lin("ffn_out", ffn, d),
            "ln_out": ln("ln_out"),
        }

    def position_ids(self, ids: Tensor) -> Tensor:
        return torch.arange(ids.shape[0], device=ids.device)

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        x = self.word[ids]
        if self.token_types:
            x = x + self.token_type[type_ids]
        x = x + self.position[self.position_ids(ids)]  # (n, d)
        return layer_norm(x, *self.emb_ln, self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        return self.layer_params(L)

    def block(self, i: int, h: Tensor, hidden: Tensor) -> Tensor:
        L = self.layers[i]
        a = self.self_attention(i, h, hidden)
        a = layer_norm(a + h, *L["ln_attn"], self.eps)
        f = linear(self.act(linear(a, *L["ffn_in"])), *L["ffn_out"])
        return layer_norm(f + a, *L["ln_out"], self.eps)


class Roberta(Bert):
    """RoBERTa: BERT's blocks; position ids ``padding_idx + 1, + 2, ...`` (pads keep
    ``padding_idx``), so a sentence may hold ``max_position_embeddings − padding_idx − 1``
    tokens."""

    model_type = "roberta"

    def read_config(self, cfg: dict) -> None:
        super().read_config(cfg)
        pad = cfg.get("pad_token_id", 1)
        if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
            raise InputError(f"config.json: pad_token_id must be an integer, got {short(pad)}")
        self.padding_idx = pad
        self.max_positions = self.positions - pad - 1
        if self.max_positions < 1:
            raise InputError("config.json: max_position_embeddings leaves no room after padding")

    def position_ids(self, ids: Tensor) -> Tensor:
        real = ids.ne(self.padding_idx).int()
        return (torch.cumsum(real, dim=0).type_as(real) * real).long() + self.padding_idx


class XLMRoberta(Roberta):
    model_type = "xlm-roberta"


class DistilBert(Bert):
    """DistilBERT: BERT's blocks under other names, no token types, config keys of its own."""

    model_type = "distilbert"
    layer_prefix = "transformer.layer.{i}."
    names = {
        "q": "attention.q_lin",
        "k": "attention.k_lin",
        "v": "attention.v_lin",
        "o": "attention.out_lin",
        "ln_attn": "sa_layer_norm",
        "ffn_in": "ffn.lin1",
        "ffn_out": "ffn.lin2",
        "ln_out": "output_layer_norm",
    }
    token_types = False

    def read_config(self, cfg: dict) -> None:
        d = self.hidden_size = config_int(cfg, "dim", "hidden_size")
        h = self.num_heads = self.num_kv_heads = config_int(cfg, "n_heads", "num_attention_heads")
        if d % h:
            raise InputError(f"config.json: dim={d} is not divisible by {h} heads")
        self.head_dim = d // h
        self.num_layers = config_int(cfg, "n_layers", "num_hidden_layers")
        self.positions = self.max_positions = config_int(cfg, "max_position_embeddings")
        self.vocab_size = config_int(cfg, "vocab_size")
        self.ffn = config_int(cfg, "hidden_dim", default=4 * d)
        self.eps = 1e-12  # fixed in DistilBERT
        self.act = activation(config_str(cfg, "activation", "gelu"))
