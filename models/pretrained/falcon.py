"""Falcon decoders (model_type "falcon"), with rotary positions or ALiBi (``alibi: true``, Falcon-RW).

q, k and v come from one fused ``query_key_value`` matrix laid out in one of three ways:

- ``new_decoder_architecture`` (Falcon-40B/180B, Falcon 2/3): grouped key/value heads. The output
  features are ``num_kv_heads`` groups, each ``[q × (h/kv) | k | v]`` of d_k features; query head
  i reads key/value head ``i // (h/kv)``. Two LayerNorms (``ln_attn``, ``ln_mlp``; one shared
  ``input_layernorm`` when ``num_ln_in_parallel_attn`` is 1) feed the parallel branches:
  ``h' = h + Attn(LN_a(h)) + MLP(LN_m(h))``.
- ``multi_query`` (Falcon-7B): h query heads then one key and one value head shared by all.
- otherwise one key/value head per query head, interleaved per head ``[q_i k_i v_i]``.

Without the new architecture, ``parallel_attn`` runs both branches on one ``input_layernorm``
(else sequential, with ``post_attention_layernorm``). The MLP is ``dense_4h_to_h(gelu(dense_h_to_4h(x)))``
and a final ``ln_f`` follows the last block.

With ``alibi`` q and k are not rotated: each head adds ``slope_h · j`` (rounded to bfloat16, as Falcon
computes it) to its scores before the ``1/√d_k``, the one function's ALiBi (:class:`Alibi`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_bool, config_float, config_str
from models.config import InputError
from models.engine.attend import Alibi, alibi_slopes
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
from models.pretrained.llama import lin
from models.pretrained.rope import Rotary, rope_inv_freq, rotary_dim


class Falcon(Architecture):
    model_type = "falcon"
    wiring = Wiring("add", ("layer", "ln_attn"))  # the residual stream's wiring (models.reads.why_stream)
    anchor = "word_embeddings.weight"
    default_mask = "causal"
    rotary = True
    input_formula = "X = LN_attn(h_L)"
    input_description = (
        "The true hidden state entering this layer after the LayerNorm that feeds the attention "
        "(ln_attn, or input_layernorm), which is what q, k and v are projected from."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        self.alibi = config_bool(cfg, "alibi", False)
        self.rotary = not self.alibi
        d = self.hidden_size = config_int(cfg, "hidden_size")
        h = self.num_heads = config_int(cfg, "num_attention_heads", "n_head")
        if d % h:
            raise InputError(f"config.json: hidden_size={d} is not divisible by {h} heads")
        dk = self.head_dim = d // h
        self.new_arch = config_bool(cfg, "new_decoder_architecture", False)
        self.multi_query = config_bool(cfg, "multi_query", True)
        self.parallel = config_bool(cfg, "parallel_attn", True)
        if self.new_arch:
            self.num_kv_heads = config_int(cfg, "num_kv_heads", "n_head_kv", default=h)
            if h % self.num_kv_heads:
                raise InputError(f"config.json: {h} query heads cannot share {self.num_kv_heads} key/value heads")
            lns = cfg.get("num_ln_in_parallel_attn")
            self.two_norms = lns is None or lns == 2
            if not self.two_norms and not self.parallel:
                raise InputError("falcon model: one LayerNorm without parallel attention is not supported")
        else:
            self.num_kv_heads = 1 if self.multi_query else h
            self.two_norms = False
        self.num_layers = config_int(cfg, "num_hidden_layers", "n_layer")
        self.max_positions = config_int(cfg, "max_position_embeddings", default=2048)
        self.vocab_size = config_int(cfg, "vocab_size")
        self.ffn = config_int(cfg, "ffn_hidden_size", default=4 * d)
        self.eps = config_float(cfg, "layer_norm_epsilon", 1e-5)
        self.act = activation(config_str(cfg, "activation", "gelu"))
        if self.alibi:
            self.slopes = Alibi(alibi_slopes(h), scale=dk**-0.5, dtype=torch.bfloat16)
        else:
            self.rotary_table = Rotary(rope_inv_freq(cfg, rotary_dim(cfg, dk), self.model_type).to(w.device))

        self.word_embeddings = w.table("word_embeddings.weight", self.vocab_size, d)  # GGUF: by rows
        self.ln_f = (w.take("ln_f.weight", d), w.take("ln_f.bias", d))
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def split_qkv(self, wt: Tensor | None) -> tuple:
        """Column views of the fused (d, ·) weight (or (·,) bias): q (h·d_k), k, v (kv·d_k)."""
        if wt is None:
            return None, None, None
        h, kv, dk = self.num_heads, self.num_kv_heads, self.head_dim
        lead = wt.shape[:-1]
        if self.new_arch:  # kv groups of [q × h/kv | k | v]
            g = wt.reshape(*lead, kv, h // kv + 2, dk)
            q, k, v = g[..., : h // kv, :], g[..., h // kv, :], g[..., h // kv + 1, :]
        elif self.multi_query:  # h queries, then one k and one v
            g = wt.reshape(*lead, h + 2, dk)
            q, k, v = g[..., :h, :], g[..., h, :], g[..., h + 1, :]
        else:  # per head [q k v]
            g = wt.reshape(*lead, h, 3, dk)
            q, k, v = g[..., 0, :], g[..., 1, :], g[..., 2, :]
        return q.reshape(*lead, h * dk), k.reshape(*lead, kv * dk), v.reshape(*lead, kv * dk)

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d, h, kv, dk = f"h.{i}.", self.hidden_size, self.num_heads, self.num_kv_heads, self.head_dim
        w_qkv, b_qkv = lin(w, p + "self_attention.query_key_value", d, (h + 2 * kv) * dk)
        (wq, wk, wv), (bq, bk, bv) = self.split_qkv(w_qkv), self.split_qkv(b_qkv)

        def ln(name: str) -> tuple[Tensor, Tensor]:
            return w.take(p + name + ".weight", d), w.take(p + name + ".bias", d)

        layer = {
            "q": (wq, bq), "k": (wk, bk), "v": (wv, bv),
            "o": lin(w, p + "self_attention.dense", d, d),
            "fc": lin(w, p + "mlp.dense_h_to_4h", d, self.ffn),
            "proj": lin(w, p + "mlp.dense_4h_to_h", self.ffn, d),
        }  # fmt: skip
        if self.two_norms:
            layer["ln_attn"], layer["ln_mlp"] = ln("ln_attn"), ln("ln_mlp")
        else:
            layer["ln_attn"] = ln("input_layernorm")
            if not self.parallel:
                layer["ln_mlp"] = ln("post_attention_layernorm")
        return layer

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        return self.word_embeddings[ids].to(torch.float32)  # (n, d)

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return layer_norm(h, *self.layers[i]["ln_attn"], self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        if self.alibi:
            return self.layer_params(self.layers[i], alibi=self.slopes)
        return self.layer_params(self.layers[i], rope=self.rotary_table(n))

    def mlp(self, L: dict, x: Tensor) -> Tensor:
        return linear(self.act(linear(x, *L["fc"])), *L["proj"])

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        x = self.attention_input(i, h)
        a = self.self_attention(i, x, hidden, cache)
        if self.new_arch or self.parallel:  # both branches beside each other
            m = self.mlp(L, layer_norm(h, *L["ln_mlp"], self.eps) if self.two_norms else x)
            return m + a + h
        h = h + a  # sequential (old architecture, parallel_attn false)
        return self.mlp(L, layer_norm(h, *L["ln_mlp"], self.eps)) + h

    tied_default = True  # FalconForCausalLM ties its head to the word embeddings

    def input_embeddings(self) -> Tensor:
        return self.word_embeddings

    def final(self, h: Tensor) -> Tensor:
        return layer_norm(h, *self.ln_f, self.eps)
