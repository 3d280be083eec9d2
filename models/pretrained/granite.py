"""Granite (model_type "granite"): a LLaMA-style decoder with four multipliers.

- ``embedding_multiplier``: the embeddings are multiplied by it before layer 0;
- ``attention_multiplier``: the scores are multiplied by it instead of 1/√d_k (stage ``scaled``);
- ``residual_multiplier``: the attention's and the MLP's outputs are multiplied by it before
  they are added to the residual stream;
- ``logits_scaling``: the vocabulary logits are divided by it (generation and the logit lens).
"""

from __future__ import annotations

from torch import Tensor

from models.checks import config_float
from models.pretrained.common import Weights
from models.pretrained.llama import Llama


class Granite(Llama):
    model_type = "granite"

    def __init__(self, cfg: dict, w: Weights) -> None:
        super().__init__(cfg, w)
        self.embedding_multiplier = config_float(cfg, "embedding_multiplier", 1.0)
        self.residual_multiplier = config_float(cfg, "residual_multiplier", 1.0)
        self.scale = config_float(cfg, "attention_multiplier", 1.0)
        self.scale_formula = f"S × {self.scale:g} (attention_multiplier)"
        self.logits_scaling = config_float(cfg, "logits_scaling", 1.0)

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        return super().embed(ids, type_ids) * self.embedding_multiplier

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        a = self.self_attention(i, self.attention_input(i, h), hidden, cache)
        h = h + a * self.residual_multiplier
        return h + self.mlp(L, self.rms(h, L["norm_mlp"])) * self.residual_multiplier
