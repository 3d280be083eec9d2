"""A tiny LLaMA decoder in plain torch whose ``state_dict`` keys are transformers' own.

Saved with :func:`save_weights` it is a ``model_type: "llama"`` checkpoint that
``LlamaForCausalLM.from_pretrained`` and the explorer's loader (models/pretrained/llama.py) both
read. The steps follow transformers' ``modeling_llama.py``: pre-norm blocks with RMSNorm, rotary
positions in the rotate-half layout, causal softmax attention, a SiLU-gated MLP, a final norm and an
untied ``lm_head``. No biases.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from models.engine.attend import Variant, attend


@dataclass(frozen=True)
class TinyConfig:
    vocab_size: int
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 32
    max_position_embeddings: int = 256
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    initializer_range: float = 0.02
    bos_token_id: int = 0

    def __post_init__(self) -> None:
        assert self.hidden_size % self.num_attention_heads == 0, "hidden_size must split into heads"
        assert (self.hidden_size // self.num_attention_heads) % 2 == 0, "rotary needs an even head_dim"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def to_hf(self) -> dict:
        """config.json as transformers writes a LlamaConfig (the keys the explorer reads too)."""
        cfg = asdict(self)
        cfg.update(
            architectures=["LlamaForCausalLM"], model_type="llama", num_key_value_heads=self.num_attention_heads,
            head_dim=self.head_dim, hidden_act="silu", attention_bias=False, mlp_bias=False,
            tie_word_embeddings=False, eos_token_id=None, pad_token_id=None, torch_dtype="float32",
            rope_scaling=None, attention_dropout=0.0,
        )  # fmt: skip
        return cfg


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        var = x.pow(2).mean(-1, keepdim=True)  # (B, T, 1)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotary(cfg: TinyConfig, n: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """cos and sin, each (n, head_dim), in transformers' layout (the half-angles repeated)."""
    dk = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, dk, 2, dtype=torch.int64).float() / dk))  # (dk/2,)
    pos = torch.arange(n, dtype=torch.float32)  # (n,)
    freqs = pos[:, None] * inv_freq[None, :]  # (n, dk/2)
    emb = torch.cat((freqs, freqs), dim=-1).to(device)  # (n, dk)
    return emb.cos(), emb.sin()


def rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def causal_attention(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """``(output, weights)`` of causal softmax attention; q, k, v (B, h, T, d_k): the engine's one
    attention function (:func:`models.engine.attend.attend`) with a causal variant scaled by 1/√d_k, the
    batch's texts side by side as more heads (each head reads its own k and v)."""
    B, h, T, dk = q.shape
    causal = Variant(scale=dk**-0.5, causal=True)
    out, weights = attend(q.reshape(B * h, T, dk), k.reshape(B * h, T, dk), v.reshape(B * h, T, dk), causal)
    return out.view(B, h, T, dk), weights.view(B, h, T, T)  # (B, h, T, d_k), (B, h, T, T)


class Attention(nn.Module):
    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.cfg = cfg
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
        B, T, d = x.shape
        h, dk = self.cfg.num_attention_heads, self.cfg.head_dim
        q, k, v = (p(x).view(B, T, h, dk).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q = q * cos + rotate_half(q) * sin  # (B, h, T, dk)
        k = k * cos + rotate_half(k) * sin
        out, weights = causal_attention(q, k, v)  # (B, h, T, dk), (B, h, T, T)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, d)), weights


class MLP(nn.Module):
    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        d, f = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
        a, weights = self.self_attn(self.input_layernorm(x), cos, sin)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), weights


class Decoder(nn.Module):
    """transformers' LlamaModel: ``model.embed_tokens``, ``model.layers.{i}``, ``model.norm``."""

    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class TinyLlama(nn.Module):
    """``forward(ids (B, T)) -> (logits (B, T, V), [weights (B, h, T, T) per layer])``."""

    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Decoder(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        for module in self.modules():  # as transformers' LlamaPreTrainedModel._init_weights
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=cfg.initializer_range)

    def forward(self, ids: Tensor) -> tuple[Tensor, list[Tensor]]:
        cos, sin = rotary(self.cfg, ids.shape[-1], ids.device)  # (T, dk) each
        x = self.model.embed_tokens(ids)  # (B, T, d)
        weights = []
        for layer in self.model.layers:
            x, w = layer(x, cos, sin)
            weights.append(w)
        return self.lm_head(self.model.norm(x)), weights  # (B, T, V)
