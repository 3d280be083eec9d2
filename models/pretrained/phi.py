"""Phi-1/Phi-2 decoders (model_type "phi").

One LayerNorm per block feeds both branches, which run side by side (parallel attention and MLP):
``h' = h + Attn(LN(h)) + MLP(LN(h))``, then a final LayerNorm. Every projection has a bias (q, k,
v, the output ``dense``, ``fc1``, ``fc2``); the MLP is ``fc2(gelu_new(fc1(x)))``. Only the first
``partial_rotary_factor · d_k`` features of each head rotate (0.5 unless config.json says; Phi-2
uses 0.4). With ``qk_layernorm`` every head's q and k go through a LayerNorm (centred, with bias)
before the rotation (stages ``q_normed``/``k_normed``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_bool, config_float, config_str
from models.pretrained.architecture import Architecture, Wiring
from models.pretrained.common import (
    AttentionParams,
    HeadLayerNorm,
    Weights,
    activation,
    config_int,
    layer_norm,
    linear,
)
from models.pretrained.layer_store import LayerStore
from models.pretrained.llama import lin
from models.pretrained.rope import Rotary, rope_inv_freq, rotary_dim


class Phi(Architecture):
    model_type = "phi"
    wiring = Wiring("add", ("layer", "ln"))  # the residual stream's wiring (models.reads.why_stream)
    anchor = "embed_tokens.weight"
    default_mask = "causal"
    rotary = True
    input_formula = "X = LN(h_L)"
    input_description = (
        "The true hidden state entering this layer after the block's one LayerNorm "
        "(input_layernorm), which both the attention and the MLP read (parallel branches)."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        d, h, dk = self.read_sizes(cfg, grouped=True)
        self.ffn = config_int(cfg, "intermediate_size")
        self.eps = config_float(cfg, "layer_norm_eps", 1e-5)
        self.act = activation(config_str(cfg, "hidden_act", "gelu_new"))
        self.qk_layernorm = config_bool(cfg, "qk_layernorm", False)
        rd = rotary_dim(cfg, dk, default_fraction=0.5)
        self.rotary_table = Rotary(rope_inv_freq(cfg, rd, self.model_type).to(w.device))

        self.embed_tokens = w.stored("embed_tokens.weight", self.vocab_size, d)
        self.ln_f = (w.take("final_layernorm.weight", d), w.take("final_layernorm.bias", d))
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d, h, kv, dk = f"layers.{i}.", self.hidden_size, self.num_heads, self.num_kv_heads, self.head_dim
        layer = {
            "q": lin(w, p + "self_attn.q_proj", d, h * dk),
            "k": lin(w, p + "self_attn.k_proj", d, kv * dk),
            "v": lin(w, p + "self_attn.v_proj", d, kv * dk),
            "o": lin(w, p + "self_attn.dense", h * dk, d),
            "ln": (w.take(p + "input_layernorm.weight", d), w.take(p + "input_layernorm.bias", d)),
            "fc1": lin(w, p + "mlp.fc1", d, self.ffn),
            "fc2": lin(w, p + "mlp.fc2", self.ffn, d),
        }
        if self.qk_layernorm:  # transformers sizes these d_model / h
            for which in ("q", "k"):
                name = f"{p}self_attn.{which}_layernorm."
                layer[f"{which}_norm"] = (w.take(name + "weight", d // h), w.optional(name + "bias", d // h))
        return layer

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        return self.embed_tokens[ids].to(torch.float32)  # (n, d)

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return layer_norm(h, *self.layers[i]["ln"], self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        norms = {}
        if self.qk_layernorm:
            norms = {f"{x}_norm": HeadLayerNorm(*L[f"{x}_norm"], self.eps) for x in ("q", "k")}
        return self.layer_params(L, rope=self.rotary_table(n), **norms)

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        x = self.attention_input(i, h)  # both branches read the same normed input
        a = self.self_attention(i, x, hidden, cache)
        m = linear(self.act(linear(x, *L["fc1"])), *L["fc2"])
        return a + m + h

    lm_head_bias_key = "lm_head.bias"  # PhiForCausalLM's head: nn.Linear with a bias

    def final(self, h: Tensor) -> Tensor:
        return layer_norm(h, *self.ln_f, self.eps)
