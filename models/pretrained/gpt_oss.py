"""gpt-oss decoders (model_type "gpt_oss"): LLaMA-style blocks with learned attention sinks and a
mixture-of-experts MLP.

- Attention: biases on q, k, v and o; grouped key/value heads; sliding-window and global layers
  alternating (``layer_types``, else even layers slide).
- Sinks: every head has a learned logit s_h that joins each row's softmax as one more key with no
  value, ``A_i = softmax([S_i, s_h])``. The explorer shows it as the last key column, ``sink``, of
  the scores, scaled, masked and weights stages; the real keys' weights then sum to
  ``1 − A_i,sink`` < 1, exactly as the model computes them (transformers' ``attentions`` drop that
  column; the explorer keeps it).
- MLP: the router and experts of models/pretrained/moe_gpt_oss.py.
"""

from __future__ import annotations

from dataclasses import replace

from torch import Tensor

from models.config import InputError
from models.pretrained.common import AttentionParams, Weights, config_int
from models.pretrained.llama import Llama
from models.pretrained.moe_gpt_oss import GptOssExperts


class GptOss(Llama):
    model_type = "gpt_oss"
    sinks = True  # every layer's softmax has a sink column: run explicitly, never fused (memory.py)

    def __init__(self, cfg: dict, w: Weights) -> None:
        self.moe = GptOssExperts(cfg, config_int(cfg, "hidden_size"), config_int(cfg, "intermediate_size"))
        super().__init__(cfg, w)

    def default_window(self, cfg: dict, i: int) -> int | None:
        if cfg.get("sliding_window") is None or i % 2:
            return None
        return config_int(cfg, "sliding_window")

    def layer_windows(self, cfg: dict) -> list[int | None]:
        """As LLaMA's, but a sliding layer (every even one unless ``layer_types`` says otherwise)
        without a ``sliding_window`` is refused, as transformers refuses it (issue 36: it was taken
        as full attention)."""
        types = cfg.get("layer_types")
        sliding = [t == "sliding_attention" for t in types] if isinstance(types, list) else \
            [i % 2 == 0 for i in range(self.num_layers)]  # fmt: skip
        if cfg.get("sliding_window") is None and any(sliding):
            raise InputError(f"config.json: layer {sliding.index(True)} is a sliding-window layer but sliding_window "
                             f"is null; gpt-oss needs its size (transformers refuses this config too)")  # fmt: skip
        return super().layer_windows(cfg)

    def attention_weights(self, w: Weights, p: str) -> dict:
        return {**super().attention_weights(w, p), "sinks": w.take(p + "self_attn.sinks", self.num_heads)}

    def mlp_weights(self, w: Weights, p: str) -> dict:
        return self.moe.load(w, p)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        return replace(super().attention_params(i, n), sinks=self.layers[i]["sinks"])

    def mlp(self, L: dict, x: Tensor) -> Tensor:
        return self.moe(L, x)
