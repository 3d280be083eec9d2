"""Cohere Command-R (model_type "cohere"): a parallel decoder with interleaved rotary pairs.

- One LayerNorm without bias per block (``(x − mean) / √(var + ε) · w``), read by both the
  attention and the MLP, which run side by side: ``h' = h + Attn(LN(h)) + MLP(LN(h))``.
- RoPE rotates the interleaved pairs (2j, 2j + 1) of each head, not (j, j + d/2).
- ``use_qk_norm``: a LayerNorm (no bias) of every head's q and k, each head with its own
  weights, before the rotation (stages ``q_normed``/``k_normed``).
- ``logit_scale`` multiplies the vocabulary logits (generation and the logit lens).
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_bool, config_float
from models.pretrained.architecture import Wiring
from models.pretrained.common import AttentionParams, HeadNorm, Weights
from models.pretrained.llama import Llama
from models.pretrained.rope import Rotary


def bias_free_layer_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """Cohere's LayerNorm, written as transformers does: centre, divide by √(var + ε), times w."""
    mean = x.mean(-1, keepdim=True)
    variance = (x - mean).pow(2).mean(-1, keepdim=True)
    return weight * ((x - mean) * torch.rsqrt(variance + eps))


class Cohere(Llama):
    model_type = "cohere"
    wiring = Wiring("add", ("layer", "norm_attn"))  # the residual stream's wiring (models.reads.why_stream)
    input_formula = "X = LN(h_L)"
    input_description = (
        "The true hidden state entering this layer after the block's LayerNorm (input_layernorm, no "
        "bias), which both the attention and the MLP read: they run in parallel."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        self.qk_layernorm = config_bool(cfg, "use_qk_norm", False)
        super().__init__(cfg, w)
        self.eps = config_float(cfg, "layer_norm_eps", 1e-5)
        self.logit_scale = config_float(cfg, "logit_scale", 1.0)
        self.rotary_table = Rotary(self.rotary_table.inv_freq, interleaved=True)

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d, dk = f"layers.{i}.", self.hidden_size, self.head_dim
        layer = {**self.attention_weights(w, p), **self.mlp_weights(w, p)}
        layer["norm_attn"] = w.take(p + "input_layernorm.weight", d)
        if self.qk_layernorm:
            layer["q_norm"] = w.take(p + "self_attn.q_norm.weight", self.num_heads, dk)
            layer["k_norm"] = w.take(p + "self_attn.k_norm.weight", self.num_kv_heads, dk)
        return layer

    def rms(self, x: Tensor, weight: Tensor) -> Tensor:  # every norm of Cohere is this LayerNorm
        return bias_free_layer_norm(x, weight, self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        norms = {}
        if self.qk_layernorm:
            norms = {"q_norm": HeadNorm(L["q_norm"], self.eps, centred=True),
                     "k_norm": HeadNorm(L["k_norm"], self.eps, centred=True)}  # fmt: skip
        return self.layer_params(L, rope=self.rope(n), rope_interleaved=True, sliding_window=self.windows[i],
                                 **norms)  # fmt: skip

    tied_default = True  # CohereForCausalLM ties its head to the embeddings

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        x = self.attention_input(i, h)
        return h + self.self_attention(i, x, hidden, cache) + self.mlp(L, x)
