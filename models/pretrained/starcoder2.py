"""StarCoder2 (model_type "starcoder2"): a rotary decoder built like GPT-2 around LLaMA's attention.

LayerNorms with bias (``norm_epsilon``) before the attention and the MLP and at the end, biases
on every projection (``use_bias``), a plain MLP ``c_proj(act(c_fc(x)))`` (gelu, tanh
approximation), grouped key/value heads, and a ``sliding_window`` in every layer when set.
"""

from __future__ import annotations

from torch import Tensor

from models.checks import config_float
from models.pretrained.architecture import Wiring
from models.pretrained.common import Weights, config_int, layer_norm, linear
from models.pretrained.llama import Llama, lin


class Starcoder2(Llama):
    model_type = "starcoder2"
    wiring = Wiring("add", ("layer", "ln_1"))  # the residual stream's wiring (models.reads.why_stream)
    default_act = "gelu_pytorch_tanh"
    input_formula = "X = LN₁(h_L)"
    input_description = (
        "The true hidden state entering this layer after the block's pre-attention LayerNorm "
        "(input_layernorm, with bias), which is what q, k and v are projected from."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        super().__init__(cfg, w)
        self.eps = config_float(cfg, "norm_epsilon", 1e-5)
        self.norm_bias = w.take("norm.bias", self.hidden_size)

    def default_window(self, cfg: dict, i: int) -> int | None:
        return None if cfg.get("sliding_window") is None else config_int(cfg, "sliding_window")

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d, ffn = f"layers.{i}.", self.hidden_size, self.ffn

        def ln(name: str) -> tuple[Tensor, Tensor]:
            return w.take(p + name + ".weight", d), w.take(p + name + ".bias", d)

        return {
            **self.attention_weights(w, p),
            "fc": lin(w, p + "mlp.c_fc", d, ffn),
            "proj": lin(w, p + "mlp.c_proj", ffn, d),
            "ln_1": ln("input_layernorm"),
            "ln_2": ln("post_attention_layernorm"),
        }

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return layer_norm(h, *self.layers[i]["ln_1"], self.eps)

    def mlp(self, L: dict, x: Tensor) -> Tensor:
        return linear(self.act(linear(x, *L["fc"])), *L["proj"])

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        h = h + self.self_attention(i, self.attention_input(i, h), hidden, cache)
        return h + self.mlp(L, layer_norm(h, *self.layers[i]["ln_2"], self.eps))

    def final(self, h: Tensor) -> Tensor:
        return layer_norm(h, self.norm, self.norm_bias, self.eps)
