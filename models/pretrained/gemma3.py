"""Gemma 3's text decoder (model_type "gemma3_text"): Gemma 2's blocks with Gemma 3's changes.

- As Gemma 2: embeddings times √d_model, RMS norms multiplying by ``1 + w``, norms after the
  attention and around the MLP, scores scaled by ``1/√query_pre_attn_scalar``. No soft-capping:
  Gemma 3 replaced it by the q/k norms, and transformers ignores ``attn_logit_softcapping`` for
  this family even when config.json sets it, so the explorer does too.
- New: an RMS norm (``1 + w``) on every head's q and k before the rotation (stages
  ``q_normed``/``k_normed``); sliding-window and global layers from ``layer_types`` (else every
  ``sliding_window_pattern``-th layer is global, 6 by default), and each kind of layer rotates with
  its own base: ``rope_parameters["sliding_attention"]`` (10 000 by default) and
  ``["full_attention"]`` (1 000 000 by default, the one ``rope_scaling`` scales).
"""

from __future__ import annotations

from dataclasses import replace

from models.checks import config_bool, config_mapping
from models.config import InputError
from models.pretrained.common import AttentionParams, Weights
from models.pretrained.gemma import Gemma2
from models.pretrained.rope import Rotary, rope_base, rope_inv_freq, rotary_dim

# config.json (transformers 4) keys of each layer kind's base, and transformers' defaults
BASES = {"full_attention": ("rope_theta", 1_000_000.0), "sliding_attention": ("rope_local_base_freq", 10_000.0)}


def layer_type_rope(cfg: dict, layer_type: str) -> dict:
    """The rope parameters of one kind of layer, in either config.json layout."""
    params = config_mapping(cfg, "rope_parameters")
    if isinstance(params.get(layer_type), dict):  # transformers 5: one mapping per layer type
        found = dict(params[layer_type])
    else:  # transformers 4: rope_theta, rope_local_base_freq, rope_scaling (global layers only)
        found = {"rope_type": "default"}
        if layer_type == "full_attention":
            scaling = dict(config_mapping(cfg, "rope_scaling"))
            if "type" in scaling:
                scaling.setdefault("rope_type", scaling.pop("type"))
            found.update(scaling)
    key, default = BASES[layer_type]
    found["rope_theta"] = rope_base(default, (found, "rope_theta"), (cfg, key))  # null refused, as transformers
    return found


class Gemma3Text(Gemma2):
    model_type = "gemma3_text"
    qk_norm = True

    def __init__(self, cfg: dict, w: Weights) -> None:
        if config_bool(cfg, "use_bidirectional_attention", False):
            raise InputError(f"{self.model_type} model: use_bidirectional_attention is not supported")
        super().__init__(cfg, w)
        self.softcap = None  # not applied by Gemma 3 (see the module's docstring)
        rd = rotary_dim(cfg, self.head_dim)
        self.rotary_tables = {
            kind: Rotary(rope_inv_freq(cfg, rd, self.model_type, layer_type_rope(cfg, kind)).to(w.device))
            for kind in BASES
        }

    def layer_windows(self, cfg: dict) -> list[int | None]:
        types = cfg.get("layer_types")
        if types is None:  # every sliding_window_pattern-th layer is global, as transformers fills in
            every = cfg.get("sliding_window_pattern", 6)
            if isinstance(every, bool) or not isinstance(every, int) or every < 1:
                raise InputError("config.json: sliding_window_pattern must be a positive integer")
            types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(self.num_layers)]
        self.kinds = types
        return super().layer_windows({**cfg, "layer_types": types})

    def layer_kind(self, i: int) -> str:
        return self.kinds[i]

    def attention_params(self, i: int, n: int) -> AttentionParams:
        # Gemma 2's, rotated with this kind of layer's own base
        return replace(super().attention_params(i, n), rope=self.rotary_tables[self.layer_kind(i)](n))
