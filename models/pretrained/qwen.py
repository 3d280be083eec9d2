"""Mistral, Qwen2 and Qwen3: LLaMA-style decoders with a few changes each.

- ``mistral``: a sliding window in every layer (query i sees keys i − W + 1 .. i).
- ``qwen2``: biases on q, k and v (read when present, like every family); a sliding window on
  layers ``max_window_layers`` and above when ``use_sliding_window``.
- ``qwen3``: an RMS norm on every head's q and k before the rotation (stages q_normed/k_normed).
"""

from __future__ import annotations

from models.checks import config_bool, short
from models.config import InputError
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
        if not config_bool(cfg, "use_sliding_window", False) or cfg.get("sliding_window") is None:
            return None
        first = cfg.get("max_window_layers")
        first = 28 if first is None else first
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise InputError(f"config.json: max_window_layers must be an integer ≥ 0, got {short(first)}")
        return config_int(cfg, "sliding_window") if i >= first else None

    def layer_windows(self, cfg: dict) -> list[int | None]:
        if not config_bool(cfg, "use_sliding_window", False):  # transformers drops the window then
            cfg = {**cfg, "sliding_window": None}
        return super().layer_windows(cfg)


class Qwen3(Qwen2):
    model_type = "qwen3"
    qk_norm = True
