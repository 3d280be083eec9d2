"""OLMo 2 (model_type "olmo2"): a LLaMA-style decoder with norms after, not before, each part.

- No norm before the attention: q, k and v are projected from the hidden state itself.
- q and k are RMS-normed over the whole projection (all heads of a token at once, ``q_norm`` of
  ``h·d_k`` features, ``k_norm`` of ``kv·d_k``) before the heads are split and rotated: stages
  ``q_normed``/``k_normed``.
- Post-norm blocks: ``h ← h + RMS(Attn(h))``, ``h ← h + RMS(MLP(h))``, and a final RMSNorm.
"""

from __future__ import annotations

from torch import Tensor

from models.pretrained.architecture import Wiring
from models.pretrained.common import AttentionParams, HeadNorm, Weights
from models.pretrained.llama import Llama


class Olmo2(Llama):
    model_type = "olmo2"
    wiring = Wiring("add", None, post_attn="norm_post_attn")  # the residual stream's wiring (models.reads.why_stream)
    input_formula = "X = h_L"
    input_description = (
        "The true hidden state entering this layer: OLMo 2 has no norm before its attention (its "
        "norms follow the attention and the MLP), so q, k and v are projected from h_L itself."
    )

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d = f"layers.{i}.", self.hidden_size
        h, kv, dk = self.num_heads, self.num_kv_heads, self.head_dim
        layer = {**self.attention_weights(w, p), **self.mlp_weights(w, p)}
        layer["norm_post_attn"] = w.take(p + "post_attention_layernorm.weight", d)
        layer["norm_post_mlp"] = w.take(p + "post_feedforward_layernorm.weight", d)
        layer["q_norm"] = w.take(p + "self_attn.q_norm.weight", h * dk)
        layer["k_norm"] = w.take(p + "self_attn.k_norm.weight", kv * dk)
        return layer

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return h

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        return self.layer_params(
            L, scale=self.scale, scale_formula=self.scale_formula, rope=self.rope(n),
            q_norm=HeadNorm(L["q_norm"], self.eps, whole=True), k_norm=HeadNorm(L["k_norm"], self.eps, whole=True),
            sliding_window=self.windows[i],
        )  # fmt: skip

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        h = h + self.rms(self.self_attention(i, h, hidden, cache), L["norm_post_attn"])
        return h + self.rms(self.mlp(L, h), L["norm_post_mlp"])
