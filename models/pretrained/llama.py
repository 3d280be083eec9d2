"""LLaMA-style decoders (model_type "llama") and the base of the families built like it.

Pre-norm blocks: ``h = h + Attn(RMS1(h))``, ``h = h + down(act(gate(x)) * up(x))`` with
``x = RMS2(h)``, and a final RMSNorm. There are no position embeddings: the position enters by
rotating q and k (RoPE), so ``q_rotated``/``k_rotated`` are traced as their own stages. With
``num_key_value_heads < num_attention_heads`` several query heads share one key/value head.

The families in qwen.py, gemma.py and phi3.py subclass :class:`Llama` and switch on what they
change through the class attributes below (qk-norm, ``1 + w`` norms, scaled embeddings, norms
around the attention and the MLP, fused projections) and :meth:`Llama.layer_windows`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_float, config_str, short
from models.config import InputError
from models.pretrained.architecture import Architecture, Wiring
from models.pretrained.common import (
    AttentionParams,
    HeadNorm,
    Weights,
    activation,
    config_int,
    linear,
    rms_norm,
)
from models.pretrained.layer_store import LayerStore
from models.pretrained.rope import rotary, rotary_dim


def lin(w: Weights, name: str, n_in: int, n_out: int) -> tuple[Tensor, Tensor | None]:
    """An nn.Linear's weight as (in, out) and its optional bias. nn.Linear stores (out, in);
    ``.t()`` is a view, so ``x @ W`` matches F.linear exactly."""
    return w.take(name + ".weight", n_out, n_in).t(), w.optional(name + ".bias", n_out)


class Llama(Architecture):
    model_type = "llama"
    wiring = Wiring("add", ("rms", "norm_attn"))  # the residual stream's wiring (models.reads.why_stream)
    anchor = "embed_tokens.weight"
    default_mask = "causal"
    rotary = True
    input_formula = "X = RMSNorm₁(h_L)"
    input_description = (
        "The true hidden state entering this layer after the block's pre-attention RMSNorm "
        "(input_layernorm), which is what q, k and v are projected from."
    )
    # What the families built like LLaMA switch on:
    default_act = "silu"
    norm_plus_one = False  # Gemma: RMS norms multiply by (1 + w)
    embed_scaled = False  # Gemma: embeddings times √d_model
    qk_norm = False  # Qwen3: RMS norm of every head's q and k before the rotation
    sandwich = False  # Gemma 2: norms after the attention and around the MLP too
    rotary_fraction = 1.0  # default share of each head's features that rotate

    def __init__(self, cfg: dict, w: Weights) -> None:
        self.cfg = cfg
        d = self.hidden_size = config_int(cfg, "hidden_size")
        h = self.num_heads = config_int(cfg, "num_attention_heads")
        kv = self.num_kv_heads = config_int(cfg, "num_key_value_heads", default=h)
        if h % kv:
            raise InputError(f"config.json: {h} query heads cannot share {kv} key/value heads")
        if cfg.get("head_dim") is None and d < h:  # the default d // h would be 0 (issue 36: ZeroDivisionError)
            raise InputError(f"config.json: {h} heads (num_attention_heads) are more than hidden_size={d} and "
                             f"there is no head_dim: each head would have 0 features")  # fmt: skip
        dk = self.head_dim = config_int(cfg, "head_dim", default=d // h)
        self.num_layers = config_int(cfg, "num_hidden_layers")
        self.max_positions = config_int(cfg, "max_position_embeddings")
        self.vocab_size = config_int(cfg, "vocab_size")
        self.ffn = config_int(cfg, "intermediate_size")
        self.eps = config_float(cfg, "rms_norm_eps", 1e-6)
        self.act = activation(self.activation_name(cfg))
        self.windows = self.layer_windows(cfg)
        self.scale, self.scale_formula = dk**-0.5, "S / √d_k"
        self.softcap: float | None = None
        rd = rotary_dim(cfg, dk, self.rotary_fraction)
        self.rotary_table = rotary(cfg, rd, self.model_type).to(w.device)

        self.embed_tokens = w.table("embed_tokens.weight", self.vocab_size, d)  # as stored; GGUF: by rows
        self.norm = w.take("norm.weight", d)
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    # --- configuration hooks ---------------------------------------------------------------
    def activation_name(self, cfg: dict) -> str:
        return config_str(cfg, "hidden_act", self.default_act)

    def layer_windows(self, cfg: dict) -> list[int | None]:
        """Each layer's sliding window (None: it sees every earlier token), from
        ``layer_types`` when config.json lists them, else the family's default."""
        window = cfg.get("sliding_window")
        types = cfg.get("layer_types")
        if types is None:
            return [self.default_window(cfg, i) for i in range(self.num_layers)]
        if not isinstance(types, list) or len(types) != self.num_layers:
            raise InputError(f"config.json: layer_types must list {self.num_layers} layers")
        unknown = [t for t in types if t not in ("full_attention", "sliding_attention")]
        if unknown:
            raise InputError(
                f"{self.model_type} model: unsupported layer type {short(unknown[0])}; "
                "supported: full_attention, sliding_attention"
            )
        if window is not None:
            window = config_int(cfg, "sliding_window")
        return [window if t == "sliding_attention" else None for t in types]

    def default_window(self, cfg: dict, i: int) -> int | None:
        return None  # LLaMA has no sliding window

    def rms(self, x: Tensor, weight: Tensor) -> Tensor:
        return rms_norm(x, weight, self.eps, self.norm_plus_one)

    # --- weights ---------------------------------------------------------------------------
    def attention_weights(self, w: Weights, p: str) -> dict:
        d, h, kv, dk = self.hidden_size, self.num_heads, self.num_kv_heads, self.head_dim
        return {
            "q": lin(w, p + "self_attn.q_proj", d, h * dk),
            "k": lin(w, p + "self_attn.k_proj", d, kv * dk),
            "v": lin(w, p + "self_attn.v_proj", d, kv * dk),
            "o": lin(w, p + "self_attn.o_proj", h * dk, d),
        }

    def mlp_weights(self, w: Weights, p: str) -> dict:
        d, ffn = self.hidden_size, self.ffn
        return {
            "gate": lin(w, p + "mlp.gate_proj", d, ffn),
            "up": lin(w, p + "mlp.up_proj", d, ffn),
            "down": lin(w, p + "mlp.down_proj", ffn, d),
        }

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d = f"layers.{i}.", self.hidden_size
        layer = {**self.attention_weights(w, p), **self.mlp_weights(w, p)}
        layer["norm_attn"] = w.take(p + "input_layernorm.weight", d)
        if self.sandwich:
            layer["norm_post_attn"] = w.take(p + "post_attention_layernorm.weight", d)
            layer["norm_mlp"] = w.take(p + "pre_feedforward_layernorm.weight", d)
            layer["norm_post_mlp"] = w.take(p + "post_feedforward_layernorm.weight", d)
        else:
            layer["norm_mlp"] = w.take(p + "post_attention_layernorm.weight", d)
        if self.qk_norm:
            layer["q_norm"] = w.take(p + "self_attn.q_norm.weight", self.head_dim)
            layer["k_norm"] = w.take(p + "self_attn.k_norm.weight", self.head_dim)
        return layer

    # --- computation -----------------------------------------------------------------------
    def rope(self, n: int) -> tuple[Tensor, Tensor]:
        """cos and sin of every (position, rotated feature) angle, each ``(n, rotary_dim)``."""
        return self.rotary_table(n)

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        x = self.embed_tokens[ids].to(torch.float32)  # (n, d): only these rows are converted
        if self.embed_scaled:  # like transformers: √d as a float32 tensor
            x = x * torch.tensor(self.hidden_size**0.5, dtype=torch.float32)
        return x

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return self.rms(h, self.layers[i]["norm_attn"])

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        q_norm = k_norm = None
        if self.qk_norm:
            q_norm = HeadNorm(L["q_norm"], self.eps, self.norm_plus_one)
            k_norm = HeadNorm(L["k_norm"], self.eps, self.norm_plus_one)
        return self.layer_params(L, scale=self.scale, scale_formula=self.scale_formula, rope=self.rope(n),
                                 q_norm=q_norm, k_norm=k_norm, softcap=self.softcap,
                                 sliding_window=self.windows[i])  # fmt: skip

    def mlp(self, L: dict, x: Tensor) -> Tensor:
        return linear(self.act(linear(x, *L["gate"])) * linear(x, *L["up"]), *L["down"])

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        a = self.self_attention(i, self.attention_input(i, h), hidden, cache)
        if self.sandwich:
            a = self.rms(a, L["norm_post_attn"])
        h = h + a
        m = self.mlp(L, self.rms(h, L["norm_mlp"]))
        if self.sandwich:
            m = self.rms(m, L["norm_post_mlp"])
        return h + m

    def final(self, h: Tensor) -> Tensor:
        return self.rms(h, self.norm)

    def input_embeddings(self) -> Tensor:
        return self.embed_tokens
