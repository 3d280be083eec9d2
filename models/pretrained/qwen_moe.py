"""Qwen2-MoE and Qwen3-MoE: Qwen2 / Qwen3 decoders whose MLPs are mixtures of experts.

The attention is Qwen2's (biases on q, k, v) or Qwen3's (RMS norm of every head's q and k); the
MLP of every routed layer (``decoder_sparse_step``, ``mlp_only_layers``) is a mixture of experts,
top-k routed per token exactly as transformers does (models/pretrained/moe.py). Qwen2-MoE adds a
sigmoid-gated shared expert. Routing acts only in the layers below the traced one, on the
hidden states it reads.

Sliding windows: Qwen2-MoE's ``layer_types`` (by default, with ``use_sliding_window``, the even
layers below ``max_window_layers``); Qwen3-MoE's window, with ``use_sliding_window``, covers
every layer.
"""

from __future__ import annotations

from torch import Tensor

from models.checks import config_bool
from models.pretrained.common import Weights, config_int
from models.pretrained.llama import Llama
from models.pretrained.moe import MoeConfig, load_moe, moe_mlp
from models.pretrained.qwen import Qwen2


class Qwen2Moe(Qwen2):
    model_type = "qwen2_moe"
    shared_expert = True

    def __init__(self, cfg: dict, w: Weights) -> None:
        self.moe = MoeConfig.read(cfg, self.model_type, shared=self.shared_expert)
        super().__init__(cfg, w)

    def default_window(self, cfg: dict, i: int) -> int | None:
        if not config_bool(cfg, "use_sliding_window", False) or cfg.get("sliding_window") is None:
            return None
        first = cfg.get("max_window_layers")
        first = 28 if first is None else config_int(cfg, "max_window_layers")
        return config_int(cfg, "sliding_window") if i % 2 == 0 and i < first else None

    def mlp_weights(self, w: Weights, p: str) -> dict:
        i = int(p.split(".")[1])  # p is "layers.{i}."
        if not self.moe.routes(i):
            return super().mlp_weights(w, p)
        return {"moe": load_moe(w, p, self.hidden_size, self.moe)}

    def mlp(self, L: dict, x: Tensor) -> Tensor:
        if "moe" in L:
            return moe_mlp(self.act, L["moe"], x, self.moe)
        return super().mlp(L, x)


class Qwen3Moe(Qwen2Moe):
    model_type = "qwen3_moe"
    shared_expert = False
    qk_norm = True

    def default_window(self, cfg: dict, i: int) -> int | None:
        if not config_bool(cfg, "use_sliding_window", False) or cfg.get("sliding_window") is None:
            return None
        return config_int(cfg, "sliding_window")

    def layer_windows(self, cfg: dict) -> list[int | None]:
        return Llama.layer_windows(self, {**cfg, "layer_types": None})  # every layer or none
