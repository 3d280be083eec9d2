"""Gemma and Gemma 2: LLaMA-style decoders with Gemma's own touches.

- Both: embeddings multiplied by √d_model, RMS norms that multiply by ``1 + w``, a head size
  set by config.json (not d_model / h), gelu (tanh approximation) in the MLP.
- ``gemma2``: logit soft-capping ``S ← c · tanh(S / c)`` before the mask (stage ``softcapped``),
  scores scaled by ``1/√query_pre_attn_scalar``, sliding-window and global layers alternating
  (even layers slide), and norms after the attention and around the MLP. The final-logit
  soft-cap acts on the vocabulary logits only (generation and the logit lens apply it).
"""

from __future__ import annotations

from models.checks import config_bool, config_float, config_str
from models.config import InputError
from models.pretrained.architecture import Wiring
from models.pretrained.common import Weights, config_int
from models.pretrained.llama import Llama


class Gemma(Llama):
    model_type = "gemma"
    default_act = "gelu_pytorch_tanh"
    norm_plus_one = True
    embed_scaled = True
    tied_default = True
    input_formula = "X = RMSNorm₁(h_L)"

    def activation_name(self, cfg: dict) -> str:
        key = "hidden_activation" if cfg.get("hidden_activation") is not None else "hidden_act"
        name = config_str(cfg, key, self.default_act)
        return "gelu_pytorch_tanh" if name == "gelu" else name  # as transformers reads it


class Gemma2(Gemma):
    model_type = "gemma2"
    wiring = Wiring("add", ("rms", "norm_attn"), post_attn="norm_post_attn")  # norms after the attention too
    sandwich = True

    def __init__(self, cfg: dict, w: Weights) -> None:
        if config_bool(cfg, "use_bidirectional_attention", False):
            raise InputError("gemma2 model: use_bidirectional_attention is not supported")
        super().__init__(cfg, w)
        scalar = config_float(cfg, "query_pre_attn_scalar", 256)
        self.scale = scalar**-0.5
        self.scale_formula = f"S / √{scalar:g} (query_pre_attn_scalar)"
        cap = cfg.get("attn_logit_softcapping")
        self.softcap = None if cap is None else config_float(cfg, "attn_logit_softcapping", 1.0)
        cap = cfg.get("final_logit_softcapping")
        self.final_logit_softcap = None if cap is None else config_float(cfg, "final_logit_softcapping", 1.0)

    def default_window(self, cfg: dict, i: int) -> int | None:
        if cfg.get("sliding_window") is None or i % 2:
            return None
        return config_int(cfg, "sliding_window")
