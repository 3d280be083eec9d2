"""Phi-3 (model_type "phi3"): a LLaMA-style decoder with fused projections.

q, k and v come from one matrix ``qkv_proj`` (rows: h·d_k query, then kv·d_k key, then kv·d_k
value features) and the MLP's gate and up from one ``gate_up_proj`` (gate first). The rotation
may cover only part of each head (``partial_rotary_factor``) and a ``sliding_window`` applies to
every layer. Long-context variants (rope type "longrope") are refused: not reproduced exactly.
"""

from __future__ import annotations

from models.pretrained.common import Weights, config_int
from models.pretrained.llama import Llama, lin


class Phi3(Llama):
    model_type = "phi3"

    def default_window(self, cfg: dict, i: int) -> int | None:
        if cfg.get("sliding_window") is None:
            return None
        return config_int(cfg, "sliding_window")

    def attention_weights(self, w: Weights, p: str) -> dict:
        d, h, kv, dk = self.hidden_size, self.num_heads, self.num_kv_heads, self.head_dim
        wq, bq = lin(w, p + "self_attn.qkv_proj", d, (h + 2 * kv) * dk)
        a, b = h * dk, (h + kv) * dk

        def part(t, lo, hi):
            return None if t is None else t[..., lo:hi]  # column slices: views, no copies

        return {
            "q": (part(wq, 0, a), part(bq, 0, a)),
            "k": (part(wq, a, b), part(bq, a, b)),
            "v": (part(wq, b, None), part(bq, b, None)),
            "o": lin(w, p + "self_attn.o_proj", h * dk, d),
        }

    def mlp_weights(self, w: Weights, p: str) -> dict:
        d, ffn = self.hidden_size, self.ffn
        wg, bg = lin(w, p + "mlp.gate_up_proj", d, 2 * ffn)
        return {
            "gate": (wg[:, :ffn], None if bg is None else bg[:ffn]),
            "up": (wg[:, ffn:], None if bg is None else bg[ffn:]),
            "down": lin(w, p + "mlp.down_proj", ffn, d),
        }
