"""LLaMA-style decoders (model_type "llama"): RMSNorm, rotary positions, grouped-query attention.

Pre-norm blocks: ``h = h + Attn(RMS1(h))``, ``h = h + down(act(gate(x)) * up(x))`` with
``x = RMS2(h)``, and a final RMSNorm. There are no position embeddings: the position enters by
rotating q and k (RoPE), so ``q_rotated``/``k_rotated`` are traced as their own stages. With
``num_key_value_heads < num_attention_heads`` several query heads share one key/value head.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from models.checks import config_float, config_mapping, config_str, short
from models.config import InputError
from models.pretrained.common import (
    Architecture,
    AttentionParams,
    Weights,
    activation,
    attention,
    config_int,
    linear,
    rms_norm,
)

ROPE_TYPES = ("default", "linear", "llama3")


def rope_inv_freq(cfg: dict, head_dim: int) -> Tensor:
    """The rotation speed of each pair of dimensions, ``(d_k/2,)``, as transformers computes it.

    Accepts both config layouts: transformers 5 (``rope_parameters``) and 4 (``rope_theta`` plus
    an optional ``rope_scaling``).
    """
    params = {**config_mapping(cfg, "rope_scaling"), **config_mapping(cfg, "rope_parameters")}
    kind = params.get("rope_type", params.get("type", "default"))
    if not isinstance(kind, str) or kind not in ROPE_TYPES:
        raise InputError(f"unsupported rope type {short(kind)}; supported: {', '.join(ROPE_TYPES)}")
    theta = {"rope_theta": params["rope_theta"]} if "rope_theta" in params else cfg
    base = config_float(theta, "rope_theta", 10000.0)

    def number(name: str) -> float:  # a required positive number of the rope parameters
        if name not in params:
            raise InputError(f"config.json: rope type {kind!r} needs {name!r} in its rope parameters")
        return config_float(params, name, 1.0)

    steps = torch.arange(0, head_dim, 2, dtype=torch.int64).float()
    inv_freq = 1.0 / (base ** (steps / head_dim))
    if kind == "linear":
        inv_freq = inv_freq / number("factor")
    elif kind == "llama3":
        factor = number("factor")
        low, high = number("low_freq_factor"), number("high_freq_factor")
        if high <= low:
            raise InputError(f"config.json: rope high_freq_factor {high} must exceed low_freq_factor {low}")
        old_len = config_float(
            params, "original_max_position_embeddings", config_int(cfg, "max_position_embeddings")
        )
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, scaled)
    return inv_freq


class Llama(Architecture):
    model_type = "llama"
    default_mask = "causal"
    rotary = True
    input_formula = "X = RMSNorm₁(h_L)"
    input_description = (
        "The true hidden state entering this layer after the block's pre-attention RMSNorm "
        "(input_layernorm), which is what q, k and v are projected from."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        d = self.hidden_size = config_int(cfg, "hidden_size")
        h = self.num_heads = config_int(cfg, "num_attention_heads")
        kv = self.num_kv_heads = config_int(cfg, "num_key_value_heads", default=h)
        if h % kv:
            raise InputError(f"config.json: {h} query heads cannot share {kv} key/value heads")
        dk = self.head_dim = config_int(cfg, "head_dim", default=d // h)
        self.num_layers = config_int(cfg, "num_hidden_layers")
        self.max_positions = config_int(cfg, "max_position_embeddings")
        self.vocab_size = config_int(cfg, "vocab_size")
        ffn = config_int(cfg, "intermediate_size")
        self.eps = config_float(cfg, "rms_norm_eps", 1e-6)
        self.act = activation(config_str(cfg, "hidden_act", "silu"))
        self.inv_freq = rope_inv_freq(cfg, dk).to(w.device)
        self._rope: tuple[int, tuple[Tensor, Tensor]] | None = None

        self.embed_tokens = w.take("embed_tokens.weight", self.vocab_size, d)
        self.norm = w.take("norm.weight", d)
        self.layers = []
        for i in range(self.num_layers):
            p = f"layers.{i}."

            def lin(name: str, n_in: int, n_out: int, p: str = p) -> tuple[Tensor, Tensor | None]:
                # nn.Linear stores (out, in); .t() is a view, so x @ W matches F.linear exactly
                weight = w.take(p + name + ".weight", n_out, n_in).t()
                return weight, w.optional(p + name + ".bias", n_out)

            self.layers.append(
                {
                    "q": lin("self_attn.q_proj", d, h * dk),
                    "k": lin("self_attn.k_proj", d, kv * dk),
                    "v": lin("self_attn.v_proj", d, kv * dk),
                    "o": lin("self_attn.o_proj", h * dk, d),
                    "norm_attn": w.take(p + "input_layernorm.weight", d),
                    "norm_mlp": w.take(p + "post_attention_layernorm.weight", d),
                    "gate": lin("mlp.gate_proj", d, ffn),
                    "up": lin("mlp.up_proj", d, ffn),
                    "down": lin("mlp.down_proj", ffn, d),
                }
            )

    def rope(self, n: int) -> tuple[Tensor, Tensor]:
        """cos and sin of every (position, dimension) angle, each ``(n, d_k)``; cached per n."""
        cached = self._rope  # one read: another thread may replace it meanwhile
        if cached is None or cached[0] != n:
            pos = torch.arange(n, device=self.inv_freq.device).float()
            freqs = pos[:, None] * self.inv_freq  # (n, d_k/2)
            emb = torch.cat((freqs, freqs), dim=-1)  # (n, d_k)
            cached = self._rope = (n, (emb.cos(), emb.sin()))
        return cached[1]

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        return self.embed_tokens[ids]  # (n, d)

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return rms_norm(h, self.layers[i]["norm_attn"], self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        L = self.layers[i]
        return AttentionParams(
            *L["q"],
            *L["k"],
            *L["v"],
            *L["o"],
            heads=self.num_heads,
            kv_heads=self.num_kv_heads,
            d_k=self.head_dim,
            scale=self.head_dim**-0.5,
            scale_formula="S / √d_k",
            rope=self.rope(n),
        )

    def block(self, i: int, h: Tensor, hidden: Tensor) -> Tensor:
        L = self.layers[i]
        h = h + attention(self.attention_input(i, h), self.attention_params(i, h.shape[0]), hidden)
        x = rms_norm(h, L["norm_mlp"], self.eps)
        return h + linear(self.act(linear(x, *L["gate"])) * linear(x, *L["up"]), *L["down"])

    def final(self, h: Tensor) -> Tensor:
        return rms_norm(h, self.norm, self.eps)
