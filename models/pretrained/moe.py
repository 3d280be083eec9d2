"""Mixture-of-experts MLPs (Qwen2-MoE, Qwen3-MoE), routed exactly as transformers routes them.

For every token a router picks ``top_k`` of ``E`` experts: ``p = softmax(x W_routerᵀ)`` in float32,
the ``top_k`` largest probabilities (optionally renormalised to sum to 1, ``norm_topk_prob``) weigh
those experts' outputs ``down(act(gate(x)) · up(x))``, which are added expert by expert in
ascending order (as transformers' eager experts loop does). Qwen2-MoE adds a shared expert, an
ordinary MLP gated per token by ``sigmoid(x w_shared_gate)``.

The MLPs run only in the layers below the traced one: the explorer traces attention, so the
routing shapes the hidden states the traced layer reads, never a stage of its own.

Checkpoints store the experts one by one (``mlp.experts.{e}.gate_proj.weight``, the layout on the
Hugging Face hub) or fused (``mlp.experts.gate_up_proj`` ``(E, 2·I, d)`` and
``mlp.experts.down_proj`` ``(E, d, I)``); both are read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from models.checks import config_bool, short
from models.config import InputError
from models.pretrained.checkpoint import Weights
from models.pretrained.common import config_int, linear


@dataclass(frozen=True)
class MoeConfig:
    """Which layers route, and how: read from config.json with its checks."""

    num_experts: int
    top_k: int
    norm_topk_prob: bool
    expert_size: int  # moe_intermediate_size
    shared_size: int | None  # shared_expert_intermediate_size (Qwen2-MoE), None: no shared expert
    sparse_step: int  # decoder_sparse_step: every sparse_step-th layer routes
    dense_layers: frozenset[int]  # mlp_only_layers: ordinary MLPs

    @classmethod
    def read(cls, cfg: dict, model_type: str, shared: bool) -> MoeConfig:
        experts = next((cfg[k] for k in ("num_experts", "num_local_experts") if cfg.get(k) is not None), None)
        if experts is None:
            raise InputError("config.json lacks 'num_experts'")
        if isinstance(experts, bool) or not isinstance(experts, int) or experts < 0:
            raise InputError(f"config.json: num_experts must be an integer ≥ 0, got {short(experts)}")
        top_k = config_int(cfg, "num_experts_per_tok") if experts else 1
        if top_k > max(experts, 1):
            raise InputError(f"config.json: num_experts_per_tok={top_k} exceeds num_experts={experts}")
        dense = cfg.get("mlp_only_layers") or []
        if not isinstance(dense, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in dense):
            raise InputError(f"config.json: mlp_only_layers must list layer numbers, got {short(dense)}")
        return cls(
            num_experts=experts,
            top_k=top_k,
            norm_topk_prob=config_bool(cfg, "norm_topk_prob", False),
            expert_size=config_int(cfg, "moe_intermediate_size") if experts else 0,
            shared_size=config_int(cfg, "shared_expert_intermediate_size") if shared and experts else None,
            sparse_step=config_int(cfg, "decoder_sparse_step", default=1),
            dense_layers=frozenset(dense),
        )

    def routes(self, i: int) -> bool:
        """Whether layer ``i`` has a mixture of experts (else an ordinary MLP), as transformers decides."""
        return i not in self.dense_layers and self.num_experts > 0 and (i + 1) % self.sparse_step == 0


def load_moe(w: Weights, p: str, d: int, moe: MoeConfig) -> dict:
    """A routed layer's tensors: ``router`` ``(d, E)``, ``experts`` (one dict of gate/up/down per
    expert) and, for Qwen2-MoE, ``shared`` (gate/up/down) and ``shared_gate`` ``(d, 1)``."""
    size, e = moe.expert_size, moe.num_experts
    experts = []
    if p + "mlp.experts.gate_up_proj" in w:  # fused, as transformers 5 holds them in memory
        gate_up = w.take(p + "mlp.experts.gate_up_proj", e, 2 * size, d)
        down = w.take(p + "mlp.experts.down_proj", e, d, size)
        for j in range(e):
            experts.append({"gate": (gate_up[j, :size].t(), None), "up": (gate_up[j, size:].t(), None),
                            "down": (down[j].t(), None)})  # fmt: skip
    else:
        for j in range(e):
            q = f"{p}mlp.experts.{j}."
            experts.append({
                "gate": (w.take(q + "gate_proj.weight", size, d).t(), None),
                "up": (w.take(q + "up_proj.weight", size, d).t(), None),
                "down": (w.take(q + "down_proj.weight", d, size).t(), None),
            })  # fmt: skip
    layer = {"router": w.take(p + "mlp.gate.weight", e, d).t(), "experts": experts}
    if moe.shared_size is not None:
        s, q = moe.shared_size, p + "mlp.shared_expert."
        layer["shared"] = {
            "gate": (w.take(q + "gate_proj.weight", s, d).t(), None),
            "up": (w.take(q + "up_proj.weight", s, d).t(), None),
            "down": (w.take(q + "down_proj.weight", d, s).t(), None),
        }
        layer["shared_gate"] = w.take(p + "mlp.shared_expert_gate.weight", 1, d).t()
    return layer


def gated_mlp(act: Callable[[Tensor], Tensor], m: dict, x: Tensor) -> Tensor:
    """``down(act(gate(x)) · up(x))``: one expert, or the shared expert."""
    return linear(act(linear(x, *m["gate"])) * linear(x, *m["up"]), *m["down"])


def route(router: Tensor, x: Tensor, moe: MoeConfig) -> tuple[Tensor, Tensor]:
    """Each token's chosen experts and their weights, both ``(n, top_k)``."""
    logits = x @ router  # (n, E)
    probs = F.softmax(logits, dim=-1, dtype=torch.float)
    top_weights, top_experts = torch.topk(probs, moe.top_k, dim=-1)  # (n, top_k)
    if moe.norm_topk_prob:
        top_weights = top_weights / top_weights.sum(dim=-1, keepdim=True)
    return top_weights.to(logits.dtype), top_experts


def moe_mlp(act: Callable[[Tensor], Tensor], layer: dict, x: Tensor, moe: MoeConfig) -> Tensor:
    """The routed MLP of ``x`` ``(n, d)``, expert by expert in ascending order, as transformers."""
    top_weights, top_experts = route(layer["router"], x, moe)
    out = torch.zeros_like(x)  # (n, d)
    chosen = F.one_hot(top_experts, num_classes=moe.num_experts).permute(2, 1, 0)  # (E, top_k, n)
    for e in torch.greater(chosen.sum(dim=(-1, -2)), 0).nonzero()[:, 0].tolist():
        slot, tokens = torch.where(chosen[e])  # which of each token's top_k picks expert e
        y = gated_mlp(act, layer["experts"][e], x[tokens])  # (m, d)
        out.index_add_(0, tokens, (y * top_weights[tokens, slot, None]).to(out.dtype))  # --dtype: y may be bf16
    if "shared" in layer:
        shared = gated_mlp(act, layer["shared"], x)
        out = out + torch.sigmoid(x @ layer["shared_gate"]) * shared
    return out
