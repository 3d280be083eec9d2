"""ModernBERT encoders (model_type "modernbert").

Embeddings are the token rows through a LayerNorm (no position embeddings: positions rotate q and
k). Pre-norm blocks ``h = h + Attn(LN_a(h))``, ``h = h + Wo(act(x_in) · x_gate)`` with
``[x_in | x_gate] = Wi(LN_m(h))`` (a gated MLP), and a final LayerNorm; layer 0 attends to the
embeddings directly (no attention norm). No biases by default (``attention_bias``, ``mlp_bias``,
``norm_bias``). Global and local layers alternate (``layer_types``, else every
``global_attn_every_n_layers``-th layer is global, 3 by default): a local layer's query sees only
the keys at most ``local_attention / 2`` positions away on either side, and each kind rotates with
its own base (``global_rope_theta`` 160 000, ``local_rope_theta`` 10 000 by default).
"""

from __future__ import annotations

from torch import Tensor

from models.checks import config_float, config_mapping, config_str
from models.config import InputError
from models.pretrained.architecture import Architecture, Wiring
from models.pretrained.common import (
    AttentionParams,
    Weights,
    activation,
    config_int,
    layer_norm,
    linear,
)
from models.pretrained.layer_store import LayerStore
from models.pretrained.llama import lin
from models.pretrained.rope import Rotary, rope_base, rope_inv_freq

KINDS = ("full_attention", "sliding_attention")
BASES = {"full_attention": ("global_rope_theta", 160_000.0), "sliding_attention": ("local_rope_theta", 10_000.0)}


def kind_rope(cfg: dict, kind: str) -> dict:
    """One kind of layer's rope parameters, in either config.json layout."""
    params = config_mapping(cfg, "rope_parameters")
    found = dict(params[kind]) if isinstance(params.get(kind), dict) else {"rope_type": "default"}
    if not isinstance(params.get(kind), dict):
        scaling = dict(config_mapping(cfg, "rope_scaling"))  # transformers 4: scales both kinds
        if "type" in scaling:
            scaling.setdefault("rope_type", scaling.pop("type"))
        found.update(scaling)
    key, default = BASES[kind]
    found["rope_theta"] = rope_base(default, (found, "rope_theta"), (cfg, key))  # null refused, as transformers
    return found


class ModernBert(Architecture):
    model_type = "modernbert"
    wiring = Wiring("add", ("layer", "ln_attn"))  # the residual stream's wiring (models.reads.why_stream)
    anchor = "embeddings.tok_embeddings.weight"
    default_mask = "padding"
    rotary = True
    input_formula = "X = LN_attn(h_L)  (layer 0: X = h_0)"
    input_description = (
        "The true hidden state entering this layer after its attention LayerNorm (attn_norm); "
        "layer 0 reads the normed embeddings as they are."
    )

    def __init__(self, cfg: dict, w: Weights) -> None:
        d, h, dk = self.read_sizes(cfg)
        self.ffn = config_int(cfg, "intermediate_size")
        self.eps = config_float(cfg, "norm_eps", 1e-5)
        self.act = activation(config_str(cfg, "hidden_activation", "gelu"))
        self.band = config_int(cfg, "local_attention", default=128) // 2
        types = cfg.get("layer_types")
        if types is None:
            every = config_int(cfg, "global_attn_every_n_layers", default=3)
            types = [KINDS[1] if i % every else KINDS[0] for i in range(self.num_layers)]
        if not isinstance(types, list) or len(types) != self.num_layers or any(t not in KINDS for t in types):
            raise InputError(
                f"config.json: layer_types must list {self.num_layers} layers, each one of {', '.join(KINDS)}"
            )
        self.kinds = types
        self.rotary_tables = {k: Rotary(rope_inv_freq(cfg, dk, self.model_type, kind_rope(cfg, k)).to(w.device))
                              for k in KINDS}  # fmt: skip

        self.tok_embeddings = w.take("embeddings.tok_embeddings.weight", self.vocab_size, d)
        self.emb_ln = self.norm(w, "embeddings.norm")
        self.final_ln = self.norm(w, "final_norm")
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def norm(self, w: Weights, name: str) -> tuple[Tensor, Tensor | None]:
        return w.take(name + ".weight", self.hidden_size), w.optional(name + ".bias", self.hidden_size)

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d = f"layers.{i}.", self.hidden_size
        wqkv, bqkv = lin(w, p + "attn.Wqkv", d, 3 * d)
        wi, bi = lin(w, p + "mlp.Wi", d, 2 * self.ffn)

        def third(t: Tensor | None, j: int) -> Tensor | None:
            return None if t is None else t[..., j * d : (j + 1) * d]  # column views, no copies

        def half(t: Tensor | None, j: int) -> Tensor | None:
            return None if t is None else t[..., j * self.ffn : (j + 1) * self.ffn]

        return {
            "q": (third(wqkv, 0), third(bqkv, 0)),
            "k": (third(wqkv, 1), third(bqkv, 1)),
            "v": (third(wqkv, 2), third(bqkv, 2)),
            "o": lin(w, p + "attn.Wo", d, d),
            "ln_attn": self.norm(w, p + "attn_norm") if i > 0 else None,
            "ln_mlp": self.norm(w, p + "mlp_norm"),
            "wi_in": (half(wi, 0), half(bi, 0)),
            "wi_gate": (half(wi, 1), half(bi, 1)),
            "wo": lin(w, p + "mlp.Wo", self.ffn, d),
        }

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        return layer_norm(self.tok_embeddings[ids], *self.emb_ln, self.eps)  # (n, d)

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        ln = self.layers[i]["ln_attn"]
        return h if ln is None else layer_norm(h, *ln, self.eps)

    def attention_params(self, i: int, n: int) -> AttentionParams:
        kind = self.kinds[i]
        band = self.band if kind == "sliding_attention" else None
        return self.layer_params(self.layers[i], rope=self.rotary_tables[kind](n), band=band)

    def block(self, i: int, h: Tensor, hidden: Tensor) -> Tensor:
        L = self.layers[i]
        h = h + self.self_attention(i, self.attention_input(i, h), hidden)
        x = layer_norm(h, *L["ln_mlp"], self.eps)
        return h + linear(self.act(linear(x, *L["wi_in"])) * linear(x, *L["wi_gate"]), *L["wo"])

    def final(self, h: Tensor) -> Tensor:
        return layer_norm(h, *self.final_ln, self.eps)
