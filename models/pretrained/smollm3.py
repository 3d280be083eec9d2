"""SmolLM3 (model_type "smollm3"): a LLaMA-style decoder with layers that use no positions.

``no_rope_layers[i]`` is 1 where layer i rotates q and k (RoPE) and 0 where it does not (NoPE,
by default every fourth layer): there the trace has no ``q_rotated``/``k_rotated`` stages and
only the causal mask tells positions apart. Sliding windows follow ``layer_types`` (by default,
with ``use_sliding_window``, the NoPE layers slide).
"""

from __future__ import annotations

from models.checks import config_bool, short
from models.config import InputError
from models.pretrained.common import AttentionParams, config_int
from models.pretrained.llama import Llama


def rope_flags(cfg: dict, num_layers: int) -> list[bool]:
    """For each layer, whether it rotates q and k (``no_rope_layers``, or transformers' default)."""
    flags = cfg.get("no_rope_layers")
    if flags is None:  # NoPE every no_rope_layer_interval-th layer
        every = config_int(cfg, "no_rope_layer_interval", default=4)
        flags = [int((i + 1) % every != 0) for i in range(num_layers)]
    if (not isinstance(flags, list) or len(flags) != num_layers
            or any(isinstance(f, bool) or f not in (0, 1) for f in flags)):  # fmt: skip
        raise InputError(
            f"config.json: no_rope_layers must list 0 or 1 for each of the {num_layers} layers, got {short(flags)}"
        )
    return [f == 1 for f in flags]


class SmolLM3(Llama):
    model_type = "smollm3"

    def layer_windows(self, cfg: dict) -> list[int | None]:
        self.uses_rope = rope_flags(cfg, self.num_layers)
        if cfg.get("layer_types") is None:  # as transformers fills them in
            slide = config_bool(cfg, "use_sliding_window", False) and cfg.get("sliding_window") is not None
            types = ["sliding_attention" if slide and not r else "full_attention" for r in self.uses_rope]
            cfg = {**cfg, "layer_types": types}
        return super().layer_windows(cfg)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        p = super().attention_params(i, n)
        if not self.uses_rope[i]:
            p.rope = None  # a NoPE layer: q and k are not rotated
        return p
