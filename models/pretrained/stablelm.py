"""StableLM (model_type "stablelm"): a rotary decoder with LayerNorms and partial rotary.

- LayerNorms with bias before the attention (and, sequential blocks only, before the MLP) and
  at the end; a LLaMA-style gated MLP; optional biases on q, k and v (``use_qkv_bias``).
- Only the first ``partial_rotary_factor · d_k`` features of each head rotate (default 1/4).
- ``qk_layernorm``: a LayerNorm (no bias) of every head's q and k, each head with its own
  weights (stages ``q_normed``/``k_normed``), before the rotation.
- ``use_parallel_residual``: ``h' = h + Attn(LN(h)) + MLP(LN(h))`` with one shared norm, else
  sequential ``h ← h + Attn(LN₁(h))``, ``h ← h + MLP(LN₂(h))``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_bool, config_float
from models.pretrained.architecture import Wiring
from models.pretrained.common import AttentionParams, HeadNorm, Weights, layer_norm
from models.pretrained.llama import Llama


class StableLm(Llama):
    model_type = "stablelm"
    wiring = Wiring("add", ("layer", "ln_1"))  # the residual stream's wiring (models.reads.why_stream)
    rotary_fraction = 0.25
    input_formula = "X = LN₁(h_L)"
    input_description = (
        "The true hidden state entering this layer after the block's pre-attention LayerNorm "
        "(input_layernorm, with bias), which is what q, k and v are projected from."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        self.qk_layernorm = config_bool(cfg, "qk_layernorm", False)
        self.parallel = config_bool(cfg, "use_parallel_residual", False)
        super().__init__(cfg, w)
        self.eps = config_float(cfg, "layer_norm_eps", 1e-5)
        self.norm_bias = w.take("norm.bias", self.hidden_size)

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d, dk = f"layers.{i}.", self.hidden_size, self.head_dim

        def ln(name: str) -> tuple[Tensor, Tensor]:
            return w.take(p + name + ".weight", d), w.take(p + name + ".bias", d)

        def per_head(name: str, heads: int) -> Tensor:  # (heads, d_k): one LayerNorm per head
            return torch.stack([w.take(f"{p}self_attn.{name}.norms.{j}.weight", dk) for j in range(heads)])

        layer = {**self.attention_weights(w, p), **self.mlp_weights(w, p), "ln_1": ln("input_layernorm")}
        if not self.parallel:
            layer["ln_2"] = ln("post_attention_layernorm")
        if self.qk_layernorm:
            layer["q_norm"] = per_head("q_layernorm", self.num_heads)
            layer["k_norm"] = per_head("k_layernorm", self.num_kv_heads)
        return layer

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return layer_norm(h, *self.layers[i]["ln_1"], self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        norms = {}
        if self.qk_layernorm:
            norms = {"q_norm": HeadNorm(L["q_norm"], self.eps, centred=True),
                     "k_norm": HeadNorm(L["k_norm"], self.eps, centred=True)}  # fmt: skip
        return self.layer_params(L, rope=self.rope(n), sliding_window=self.windows[i], **norms)

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        x = self.attention_input(i, h)
        a = self.self_attention(i, x, hidden, cache)
        if self.parallel:
            return h + a + self.mlp(L, x)
        h = h + a
        return h + self.mlp(L, layer_norm(h, *L["ln_2"], self.eps))

    def final(self, h: Tensor) -> Tensor:
        return layer_norm(h, self.norm, self.norm_bias, self.eps)
