"""T5 and mT5 (model_type "t5", "mt5"): relative position buckets, no scaling, RMS norms.

Pre-norm sublayers ``h + Attn(LN(h))`` with T5's LayerNorm (RMS: no centring, no bias). Scores
are NOT divided by √d_k; instead a learned bias per head and *relative position bucket* is added
(stage ``biased``). Only layer 0 of each stack owns the bias table; every later layer of that stack
adds the same bias. Encoder buckets are bidirectional, decoder buckets look back only; the cross
attention has no position bias at all. Feed-forward: ``relu`` (T5) or gated ``gelu_new`` (T5 v1.1,
mT5: ``act(x W_0) * (x W_1)``). Final RMS norms after each stack.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from models.checks import config_float, config_str, short
from models.config import InputError
from models.pretrained.architecture import Wiring
from models.pretrained.common import Weights, activation, config_int, linear, rms_norm
from models.pretrained.encdec import EncDecParams, EncoderDecoder, take_first, take_linear
from models.pretrained.layer_store import LayerStore

NO_POSITION_LIMIT = 1 << 20  # relative buckets: no table of positions to run out of


def relative_bucket(relative: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """T5's bucket of each ``key − query`` distance, written as transformers writes it (float32
    logarithm) so that every distance lands in the same bucket."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0).to(torch.long) * num_buckets
        relative = torch.abs(relative)
    else:
        relative = -torch.min(relative, torch.zeros_like(relative))
    max_exact = num_buckets // 2
    is_small = relative < max_exact
    large = max_exact + (
        torch.log(relative.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, relative, large)


class T5(EncoderDecoder):
    model_type = "t5"
    wiring = Wiring("add")  # pre-norm: h + attn, h + ffn; no positions in the stream
    anchor = "shared.weight"
    pe = "relative"
    input_formula = {"encoder": "X = RMSNorm(h_L)", "decoder": "X = RMSNorm(h_L)", "cross": "X_q = RMSNorm(h'_L)"}
    input_description = {
        "encoder": "The encoder's hidden state entering this layer after the self-attention's RMS norm.",
        "decoder": "The decoder's hidden state entering this layer after the self-attention's RMS norm.",
        "cross": "The decoder's hidden state after this layer's self-attention, RMS-normed by the "
                 "cross-attention's norm: the queries are projected from it.",
    }  # fmt: skip
    key_description = "The encoder's output after its final RMS norm (the same for every decoder layer)."

    def __init__(self, cfg: dict, w: Weights) -> None:
        d = self.hidden_size = config_int(cfg, "d_model")
        self.num_heads = config_int(cfg, "num_heads")
        self.head_dim = config_int(cfg, "d_kv")
        self.encoder_layers = config_int(cfg, "num_layers")
        self.decoder_layers = config_int(cfg, "num_decoder_layers", "num_layers")
        self.vocab_size = self.target_vocab_size = config_int(cfg, "vocab_size")
        self.ffn = config_int(cfg, "d_ff")
        self.eps = config_float(cfg, "layer_norm_epsilon", 1e-6)
        self.buckets = config_int(cfg, "relative_attention_num_buckets", default=32)
        self.max_distance = config_int(cfg, "relative_attention_max_distance", default=128)
        self.max_positions = NO_POSITION_LIMIT
        proj = config_str(cfg, "feed_forward_proj", "relu")
        parts = proj.split("-")
        if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
            raise InputError(f"{self.model_type} model: unsupported feed_forward_proj {short(proj)}")
        self.gated = len(parts) == 2
        # as T5Config does: "gated-gelu" means the tanh approximation
        self.act = activation("gelu_new" if proj == "gated-gelu" else parts[-1])
        self.shared = take_first(w, ("shared.weight", "encoder.embed_tokens.weight"), self.vocab_size, d)
        self.final = {side: w.take(f"{side}.final_layer_norm.weight", d) for side in ("encoder", "decoder")}
        self.tables = {  # (buckets, h): layer 0's relative position bias, shared by its whole stack
            side: w.take(f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                         self.buckets, self.num_heads)
            for side in ("encoder", "decoder")
        }  # fmt: skip
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def load_layer(self, i: int, w: Weights) -> dict:
        decoder = i >= self.encoder_layers
        side = "decoder" if decoder else "encoder"
        p = f"{side}.block.{i - self.encoder_layers if decoder else i}.layer."
        d, inner, ffn = self.hidden_size, self.num_heads * self.head_dim, self.ffn
        L = {}
        sublayers = (("self_", "0.SelfAttention"), ("cross_", "1.EncDecAttention")) if decoder else (
            ("self_", "0.SelfAttention"),)  # fmt: skip
        for key, name in sublayers:
            for role in "qkv":
                L[key + role] = take_linear(w, f"{p}{name}.{role}", d, inner, bias=False)
            L[key + "o"] = take_linear(w, f"{p}{name}.o", inner, d, bias=False)
            L[key + "norm"] = w.take(f"{p}{name.split('.')[0]}.layer_norm.weight", d)
        f = f"{p}{2 if decoder else 1}."
        L["ffn_norm"] = w.take(f + "layer_norm.weight", d)
        if self.gated:
            L["wi_0"] = take_linear(w, f + "DenseReluDense.wi_0", d, ffn, bias=False)
            L["wi_1"] = take_linear(w, f + "DenseReluDense.wi_1", d, ffn, bias=False)
        else:
            L["wi"] = take_linear(w, f + "DenseReluDense.wi", d, ffn, bias=False)
        L["wo"] = take_linear(w, f + "DenseReluDense.wo", ffn, d, bias=False)
        return L

    def norm(self, x: Tensor, weight: Tensor) -> Tensor:
        return rms_norm(x, weight, self.eps)

    def embed(self, side: str, ids: Tensor) -> Tensor:
        return self.shared[ids]  # no positions: they enter as the scores' bias

    def attention_input(self, block: str, i: int, h: Tensor) -> Tensor:
        L = self.layer(block, i)
        return self.norm(h, L["cross_norm" if block == "cross" else "self_norm"])

    def after_attention(self, block: str, i: int, h: Tensor, out: Tensor) -> Tensor:
        return h + out

    def feed_forward(self, side: str, i: int, h: Tensor) -> Tensor:
        L = self.layer(side, i)
        x = self.norm(h, L["ffn_norm"])
        if self.gated:
            x = self.act(linear(x, *L["wi_0"])) * linear(x, *L["wi_1"])
        else:
            x = self.act(linear(x, *L["wi"]))
        return h + linear(x, *L["wo"])

    def position_bias(self, block: str, n_q: int, n_k: int) -> Tensor:
        """``(h, n_q, n_k)``: the bias of bucket(j − i) for query i and key j."""
        table = self.tables[block]
        device = table.device
        relative = torch.arange(n_k, device=device)[None, :] - torch.arange(n_q, device=device)[:, None]
        buckets = relative_bucket(relative, block == "encoder", self.buckets, self.max_distance)
        return table[buckets].permute(2, 0, 1)  # (h, n_q, n_k)

    def params(self, block: str, i: int, n_q: int, n_k: int) -> EncDecParams:
        L = self.layer(block, i)
        bias = None if block == "cross" else self.position_bias(block, n_q, n_k)
        return self.linear_params(L, "cross_" if block == "cross" else "self_", scale=1.0, formula="S", bias=bias)

    def encoder_final(self, h: Tensor) -> Tensor:
        return self.norm(h, self.final["encoder"])

    def decoder_final(self, h: Tensor) -> Tensor:
        return self.norm(h, self.final["decoder"])


class MT5(T5):
    """mT5: T5 v1.1's layers (gated gelu, untied output layer) under its own model_type."""

    model_type = "mt5"
