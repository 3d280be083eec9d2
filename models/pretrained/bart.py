"""BART and Marian (model_type "bart", "marian"): post-norm encoder-decoders with biased projections.

Sublayers ``LN(h + Attn(h))`` and ``LN(h + FFN(h))``; scores scaled by 1/√d_k. BART embeds
``word · s + position[i + 2]`` (learned positions, offset 2) then a LayerNorm; Marian embeds
``word · s + P[i]`` with fixed sinusoidal positions, sines in the first half of the features and
cosines in the second (as Marian computes them, not interleaved), and no embedding norm.
``s`` is √d_model with ``scale_embedding`` (Marian's checkpoints), else 1 (BART's).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from models.checks import config_bool, config_float, config_str
from models.config import InputError
from models.pretrained.architecture import Wiring
from models.pretrained.common import Weights, activation, config_int, layer_norm, linear
from models.pretrained.encdec import EncDecParams, EncoderDecoder, take_first, take_linear
from models.pretrained.layer_store import LayerStore

LN_EPS = 1e-5  # torch.nn.LayerNorm's default, which BART's layers use


def marian_positions(n: int, d: int) -> Tensor:
    """Marian's sinusoidal table ``(n, d)``: computed in float64 exactly as transformers does,
    sin of the even features in the first half, cos of the odd ones in the second."""
    j = np.arange(d)
    angles = np.arange(n)[:, None] / np.power(10000, 2 * (j // 2) / d)[None, :]  # (n, d) float64
    out = torch.empty(n, d, dtype=torch.float32)
    half = d // 2 if d % 2 == 0 else d // 2 + 1
    out[:, :half] = torch.FloatTensor(np.sin(angles[:, 0::2]))
    out[:, half:] = torch.FloatTensor(np.cos(angles[:, 1::2]))
    return out


class Bart(EncoderDecoder):
    model_type = "bart"
    wiring = Wiring("post")  # LN(h + attn), LN(h + ffn); word and position embeddings in the stream
    anchor = "shared.weight"
    pe = "learned"
    position_offset = 2
    embedding_norm = True

    def __init__(self, cfg: dict, w: Weights) -> None:
        d = self.hidden_size = config_int(cfg, "d_model")
        self.num_heads = config_int(cfg, "encoder_attention_heads")
        if config_int(cfg, "decoder_attention_heads", default=self.num_heads) != self.num_heads:
            raise InputError(f"{self.model_type} model: encoder and decoder with different head counts "
                             "are not supported")  # fmt: skip
        if d % self.num_heads:
            raise InputError(f"config.json: d_model={d} is not divisible by {self.num_heads} heads")
        self.head_dim = d // self.num_heads
        self.encoder_layers = config_int(cfg, "encoder_layers")
        self.decoder_layers = config_int(cfg, "decoder_layers")
        self.ffn = {"encoder": config_int(cfg, "encoder_ffn_dim"), "decoder": config_int(cfg, "decoder_ffn_dim")}
        self.vocab_size = config_int(cfg, "vocab_size")
        self.target_vocab_size = self.vocab_size
        self.max_positions = config_int(cfg, "max_position_embeddings")
        self.act = activation(config_str(cfg, "activation_function", "gelu"))
        self.embed_scale = math.sqrt(d) if config_bool(cfg, "scale_embedding", False) else 1.0
        for flag in ("normalize_before", "add_final_layer_norm"):  # older configs' pre-norm (mBART-style)
            if cfg.get(flag):
                raise InputError(f"{self.model_type} model: {flag}=true (pre-norm layers) is not supported")
        self.eps = config_float(cfg, "layer_norm_eps", LN_EPS) if "layer_norm_eps" in cfg else LN_EPS
        self.read_embeddings(cfg, w)
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def read_embeddings(self, cfg: dict, w: Weights) -> None:
        d, n = self.hidden_size, self.max_positions + self.position_offset
        shared = take_first(w, ("shared.weight", "encoder.embed_tokens.weight"), self.vocab_size, d)
        self.word = {"encoder": shared, "decoder": shared}
        self.position = {side: w.take(f"{side}.embed_positions.weight", n, d) for side in ("encoder", "decoder")}
        self.emb_norm = {
            side: (w.take(f"{side}.layernorm_embedding.weight", d), w.take(f"{side}.layernorm_embedding.bias", d))
            for side in ("encoder", "decoder")
        }  # fmt: skip

    def load_layer(self, i: int, w: Weights) -> dict:
        decoder = i >= self.encoder_layers
        side = "decoder" if decoder else "encoder"
        p = f"{side}.layers.{i - self.encoder_layers if decoder else i}."
        d, ffn = self.hidden_size, self.ffn[side]

        def ln(name: str) -> tuple[Tensor, Tensor]:
            return w.take(p + name + ".weight", d), w.take(p + name + ".bias", d)

        L = {}
        for key, name in (("self_", "self_attn"), ("cross_", "encoder_attn"))[: 2 if decoder else 1]:
            for role in "qkv":
                L[key + role] = take_linear(w, f"{p}{name}.{role}_proj", d, d, bias=True)
            L[key + "o"] = take_linear(w, f"{p}{name}.out_proj", d, d, bias=True)
            L[key + "norm"] = ln(f"{name}_layer_norm")
        L["fc1"] = take_linear(w, p + "fc1", d, ffn, bias=True)
        L["fc2"] = take_linear(w, p + "fc2", ffn, d, bias=True)
        L["ffn_norm"] = ln("final_layer_norm")
        return L

    def positions(self, side: str, n: int) -> Tensor:
        return self.position[side][self.position_offset : self.position_offset + n]  # (n, d)

    def embed(self, side: str, ids: Tensor) -> Tensor:
        x = self.word[side][ids] * self.embed_scale + self.positions(side, ids.shape[0])
        return layer_norm(x, *self.emb_norm[side], self.eps) if self.embedding_norm else x

    def after_attention(self, block: str, i: int, h: Tensor, out: Tensor) -> Tensor:
        return layer_norm(h + out, *self.layer(block, i)["cross_norm" if block == "cross" else "self_norm"], self.eps)

    def feed_forward(self, side: str, i: int, h: Tensor) -> Tensor:
        L = self.layer(side, i)
        f = linear(self.act(linear(h, *L["fc1"])), *L["fc2"])
        return layer_norm(h + f, *L["ffn_norm"], self.eps)

    def params(self, block: str, i: int, n_q: int, n_k: int) -> EncDecParams:
        L = self.layer(block, i)
        return self.linear_params(L, "cross_" if block == "cross" else "self_", scale=self.head_dim**-0.5,
                                  formula="S / √d_k")  # fmt: skip


class Marian(Bart):
    model_type = "marian"
    # without shared embeddings (share_encoder_decoder_embeddings: false) there is no "shared.weight"
    anchors = ("shared.weight", "encoder.embed_tokens.weight")
    pe = "sinusoidal"
    position_offset = 0
    embedding_norm = False

    def read_embeddings(self, cfg: dict, w: Weights) -> None:
        d = self.hidden_size
        shared = take_first(w, ("shared.weight", "encoder.embed_tokens.weight"), self.vocab_size, d)
        self.word = {"encoder": shared, "decoder": shared}
        if not config_bool(cfg, "share_encoder_decoder_embeddings", True):
            self.target_vocab_size = config_int(cfg, "decoder_vocab_size", default=self.vocab_size)
            self.word["decoder"] = w.take("decoder.embed_tokens.weight", self.target_vocab_size, d)
        table = marian_positions(self.max_positions, d).to(shared.device)
        self.position = {"encoder": table, "decoder": table}
