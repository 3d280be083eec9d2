"""GPT-2 decoders (model_type "gpt2").

Pre-norm blocks: ``h = h + Attn(LN1(h))``, ``h = h + MLP(LN2(h))``, and a final LN after the last
block. GPT-2 stores its projections as "Conv1D" weights of shape (in, out), i.e. already in
right-multiplication form; q, k and v share one fused matrix ``c_attn`` of shape (d, 3d).
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_bool, config_float, config_str
from models.config import InputError
from models.pretrained.architecture import Architecture, Wiring
from models.pretrained.common import AttentionParams, Weights, activation, config_int, layer_norm, linear
from models.pretrained.layer_store import LayerStore


class GPT2(Architecture):
    model_type = "gpt2"
    wiring = Wiring("add", ("layer", "ln_1"))  # the residual stream's wiring (models.reads.why_stream)
    embedding = "gpt2"  # h₀ = wte + wpe
    anchor = "wte.weight"
    default_mask = "causal"
    input_formula = "X = LN₁(h_L)"
    input_description = (
        "The true hidden state entering this layer after the block's pre-attention "
        "LayerNorm (ln_1), which is what q, k and v are projected from."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        d = self.hidden_size = config_int(cfg, "n_embd", "hidden_size")
        h = self.num_heads = self.num_kv_heads = config_int(cfg, "n_head", "num_attention_heads")
        if d % h:
            raise InputError(f"config.json: n_embd={d} is not divisible by {h} heads")
        self.head_dim = d // h
        self.num_layers = config_int(cfg, "n_layer", "num_hidden_layers")
        self.max_positions = config_int(cfg, "n_positions", "max_position_embeddings")
        self.vocab_size = config_int(cfg, "vocab_size")
        self.ffn = config_int(cfg, "n_inner", default=4 * d)
        self.eps = config_float(cfg, "layer_norm_epsilon", 1e-5)
        self.act = activation(config_str(cfg, "activation_function", "gelu_new"))
        self.scale_by_dk = config_bool(cfg, "scale_attn_weights", True)
        self.scale_by_layer = config_bool(cfg, "scale_attn_by_inverse_layer_idx", False)

        self.wte = w.table("wte.weight", self.vocab_size, d, converted=True)  # GGUF: by rows
        self.wpe = w.take("wpe.weight", self.max_positions, d)
        self.ln_f = (w.take("ln_f.weight", d), w.take("ln_f.bias", d))
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d, ffn = f"h.{i}.", self.hidden_size, self.ffn

        def conv(name: str, n_in: int, n_out: int) -> tuple[Tensor, Tensor]:
            return w.take(p + name + ".weight", n_in, n_out), w.take(p + name + ".bias", n_out)

        def ln(name: str) -> tuple[Tensor, Tensor]:
            return w.take(p + name + ".weight", d), w.take(p + name + ".bias", d)

        (w_qkv, b_qkv) = conv("attn.c_attn", d, 3 * d)
        return {
            # column slices of the fused matrix: views, no copies
            "q": (w_qkv[:, :d], b_qkv[:d]),
            "k": (w_qkv[:, d : 2 * d], b_qkv[d : 2 * d]),
            "v": (w_qkv[:, 2 * d :], b_qkv[2 * d :]),
            "o": conv("attn.c_proj", d, d),
            "ln_1": ln("ln_1"),
            "ln_2": ln("ln_2"),
            "fc": conv("mlp.c_fc", d, ffn),
            "proj": conv("mlp.c_proj", ffn, d),
        }

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        return self.embed_at(ids, 0)

    def embed_at(self, ids: Tensor, start: int) -> Tensor:
        pos = torch.arange(start, start + ids.shape[0], device=ids.device)
        return self.wte[ids].to(self.wpe.dtype) + self.wpe[pos]  # (n, d)

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return layer_norm(h, *self.layers[i]["ln_1"], self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        scale, formula = 1.0, "S"
        if self.scale_by_dk:
            scale, formula = self.head_dim**-0.5, "S / √d_k"
        if self.scale_by_layer:
            scale, formula = scale / float(i + 1), f"{formula} / {i + 1}"
        return self.layer_params(L, scale=scale, scale_formula=formula)

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        h = h + self.self_attention(i, self.attention_input(i, h), hidden, cache)
        x = layer_norm(h, *L["ln_2"], self.eps)
        return h + linear(self.act(linear(x, *L["fc"])), *L["proj"])

    def final(self, h: Tensor) -> Tensor:
        return layer_norm(h, *self.ln_f, self.eps)

    tied_default = True  # GPT2LMHeadModel ties its head to wte

    def input_embeddings(self) -> Tensor:
        return self.wte
