"""GPT-NeoX decoders (model_type "gpt_neox"), e.g. Pythia.

Pre-norm blocks with LayerNorm; by default a parallel residual,
``h' = h + Attn(LN1(h)) + MLP(LN2(h))`` (else sequential like GPT-2). q, k and v come from one
fused ``query_key_value`` matrix whose output features are interleaved per head:
``[q_0 k_0 v_0 | q_1 k_1 v_1 | ...]``, each of d_k features. Only the first
``rotary_pct · d_k`` features of every head rotate (partial rotary).
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_bool, config_float, config_str
from models.pretrained.architecture import Architecture, Wiring
from models.pretrained.common import AttentionParams, Weights, activation, config_int, layer_norm, linear
from models.pretrained.layer_store import LayerStore
from models.pretrained.rope import Rotary, rope_inv_freq, rotary_dim


class GPTNeoX(Architecture):
    model_type = "gpt_neox"
    wiring = Wiring("add", ("layer", "ln_1"))  # the residual stream's wiring (models.reads.why_stream)
    anchor = "embed_in.weight"
    default_mask = "causal"
    rotary = True
    input_formula = "X = LN₁(h_L)"
    input_description = (
        "The true hidden state entering this layer after the block's pre-attention "
        "LayerNorm (input_layernorm), which is what q, k and v are projected from."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        d, h, dk = self.read_sizes(cfg)
        self.ffn = config_int(cfg, "intermediate_size", default=4 * d)
        self.eps = config_float(cfg, "layer_norm_eps", 1e-5)
        self.act = activation(config_str(cfg, "hidden_act", "gelu"))
        self.parallel = config_bool(cfg, "use_parallel_residual", True)
        rd = rotary_dim(cfg, dk, default_fraction=0.25)
        self.rotary_table = Rotary(rope_inv_freq(cfg, rd, self.model_type).to(w.device))

        self.embed_in = w.stored("embed_in.weight", self.vocab_size, d)
        self.ln_f = (w.take("final_layer_norm.weight", d), w.take("final_layer_norm.bias", d))
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d, h, dk, ffn = f"layers.{i}.", self.hidden_size, self.num_heads, self.head_dim, self.ffn

        def lin(name: str, n_in: int, n_out: int) -> tuple[Tensor, Tensor | None]:
            return w.take(p + name + ".weight", n_out, n_in).t(), w.optional(p + name + ".bias", n_out)

        def ln(name: str) -> tuple[Tensor, Tensor]:
            return w.take(p + name + ".weight", d), w.take(p + name + ".bias", d)

        w_qkv, b_qkv = lin("attention.query_key_value", d, 3 * d)
        # output features are (head, [q|k|v], d_k): regroup the columns by q, k, v
        w3 = w_qkv.reshape(d, h, 3, dk)
        b3 = None if b_qkv is None else b_qkv.reshape(h, 3, dk)

        def part(j: int) -> tuple[Tensor, Tensor | None]:
            weight = w3[:, :, j, :].reshape(d, h * dk)
            return weight, None if b3 is None else b3[:, j, :].reshape(h * dk)

        return {
            "q": part(0),
            "k": part(1),
            "v": part(2),
            "o": lin("attention.dense", d, d),
            "ln_1": ln("input_layernorm"),
            "ln_2": ln("post_attention_layernorm"),
            "fc": lin("mlp.dense_h_to_4h", d, ffn),
            "proj": lin("mlp.dense_4h_to_h", ffn, d),
        }

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        return self.embed_in[ids].to(torch.float32)  # (n, d)

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return layer_norm(h, *self.layers[i]["ln_1"], self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        return self.layer_params(L, rope=self.rotary_table(n))

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        a = self.self_attention(i, self.attention_input(i, h), hidden, cache)
        if self.parallel:
            m = linear(self.act(linear(layer_norm(h, *L["ln_2"], self.eps), *L["fc"])), *L["proj"])
            return m + a + h
        a = a + h
        return linear(self.act(linear(layer_norm(a, *L["ln_2"], self.eps), *L["fc"])), *L["proj"]) + a

    def final(self, h: Tensor) -> Tensor:
        return layer_norm(h, *self.ln_f, self.eps)

    lm_head_key = "embed_out.weight"  # GPTNeoXForCausalLM's head

    def input_embeddings(self) -> Tensor:
        return self.embed_in
