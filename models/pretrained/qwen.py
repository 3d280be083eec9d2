"""Mistral, Qwen2 and Qwen3: LLaMA-style decoders with a few changes each.

- ``mistral``: a sliding window in every layer (query i sees keys i − W + 1 .. i).
- ``qwen2``: biases on q, k and v (read when present, like every family); a sliding window on
  layers ``max_window_layers`` and above when ``use_sliding_window``.
- ``qwen3``: an RMS norm on every head's q and k before the rotation (stages q_normed/k_normed).
"""

from __future__ import annotations

from models.pretrained.common import config_int
from models.pretrained.llama import Llama


class Mistral(Llama):
    model_type = "mistral"

    def default_window(self, cfg: dict, i: int) -> int | None:
        if cfg.get("sliding_window") is None:
            return None
        return config_int(cfg, "sliding_window")


class Qwen2(Llama):
    model_type = "qwen2"

    def default_window(self, cfg: dict, i: int) -> int | None:
        if not cfg.get("use_sliding_window") or cfg.get("sliding_window") is None:
            return None
        first = cfg.get("max_window_layers", 28)
        return config_int(cfg, "sliding_window") if i >= first else None

    def layer_windows(self, cfg: dict) -> list[int | None]:
        if not cfg.get("use_sliding_window"):  # transformers drops the window then
            cfg = {**cfg, "sliding_window": None}
        return super().layer_windows(cfg)


class Qwen3(Qwen2):
    model_type = "qwen3"
    qk_norm = True
