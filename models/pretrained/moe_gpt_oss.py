"""gpt-oss's mixture-of-experts MLP: a router picks ``num_experts_per_tok`` of the layer's experts
for every token, and the token's MLP output is their outputs weighted by the softmax of the chosen
router logits. Exactly as transformers computes it (``GptOssMLP``):

- ``logits = x W_r + b_r`` ``(n, E)``; ``top, idx = topk(logits, k)``; ``p = softmax(top)``.
- expert e: ``[g | u]`` from ``x W_gu,e + b_gu,e`` with gate and up *interleaved* (even features
  gate, odd up); ``g = min(g, limit)``, ``u = clamp(u, −limit, limit)``;
  ``y = ((u + 1) · g · σ(α g)) W_d,e + b_d,e`` (α = ``swiglu_alpha``, limit = ``swiglu_limit``).
- ``out = Σ_k p_k · y_{idx_k}``.

The experts' weights are stored already as (in, out): ``gate_up_proj (E, d, 2f)``,
``down_proj (E, f, d)``. MXFP4-quantized checkpoints (``*_blocks``/``*_scales``) are refused.
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_float
from models.config import InputError
from models.pretrained.checkpoint import Weights
from models.pretrained.common import config_int


class GptOssExperts:
    """What one family needs to read and run gpt-oss MoE layers."""

    def __init__(self, cfg: dict, d: int, ffn: int) -> None:
        self.d, self.ffn = d, ffn
        self.experts = config_int(cfg, "num_local_experts")
        self.top_k = config_int(cfg, "num_experts_per_tok")
        if self.top_k > self.experts:
            raise InputError(f"config.json: num_experts_per_tok {self.top_k} exceeds num_local_experts {self.experts}")
        self.alpha = config_float(cfg, "swiglu_alpha", 1.702)
        self.limit = config_float(cfg, "swiglu_limit", 7.0)

    def load(self, w: Weights, p: str) -> dict:
        """Layer prefix ``p`` (``layers.{i}.``): the router and the experts' stacked weights."""
        e, d, f = self.experts, self.d, self.ffn
        if p + "mlp.experts.gate_up_proj_blocks" in w:
            raise InputError("gpt_oss model: MXFP4-quantized experts are not supported (dequantize the checkpoint)")
        return {
            "router": (w.take(p + "mlp.router.weight", e, d).t(), w.take(p + "mlp.router.bias", e)),
            "gate_up": (w.take(p + "mlp.experts.gate_up_proj", e, d, 2 * f),
                        w.take(p + "mlp.experts.gate_up_proj_bias", e, 2 * f)),
            "down": (w.take(p + "mlp.experts.down_proj", e, f, d), w.take(p + "mlp.experts.down_proj_bias", e, d)),
        }  # fmt: skip

    def __call__(self, L: dict, x: Tensor) -> Tensor:
        """``x (n, d)`` -> ``(n, d)``: each token through its chosen experts."""
        w_r, b_r = L["router"]
        logits = torch.addmm(b_r, x, w_r)  # (n, E)
        top, chosen = torch.topk(logits, self.top_k, dim=-1)  # (n, k)
        share = torch.softmax(top, dim=-1)  # (n, k)
        out = torch.zeros_like(x)
        w_gu, b_gu = L["gate_up"]
        w_d, b_d = L["down"]
        for e in torch.unique(chosen).tolist():
            tokens, slot = torch.where(chosen == e)  # the tokens that chose expert e, and in which slot
            gate_up = x[tokens] @ w_gu[e] + b_gu[e]  # (t, 2f)
            gate = gate_up[..., ::2].clamp(max=self.limit)
            up = gate_up[..., 1::2].clamp(min=-self.limit, max=self.limit)
            y = ((up + 1) * (gate * torch.sigmoid(gate * self.alpha))) @ w_d[e] + b_d[e]  # (t, d)
            out.index_add_(0, tokens, (y * share[tokens, slot, None]).to(out.dtype))  # --dtype: y may be bf16
        return out
