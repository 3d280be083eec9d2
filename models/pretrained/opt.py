"""OPT decoders (model_type "opt").

Learned position embeddings read at ``position + 2`` (OPT's table keeps two rows before position
0), added to the token embeddings (projected by ``project_in`` when ``word_embed_proj_dim`` differs
from the hidden size, as in OPT-350m). Blocks: with ``do_layer_norm_before`` (every OPT but 350m)
``h = h + Attn(LN1(h))``, ``h = h + fc2(relu(fc1(LN2(h))))`` and a final LayerNorm; without it the
norms come after each residual sum (post-norm) and there is no final one. Biases on every
projection unless ``enable_bias`` is false. transformers multiplies q by 1/√d_k before the
product; the explorer scales the scores instead (the same numbers, to rounding).
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.checks import config_bool, config_str
from models.pretrained.architecture import Architecture, Wiring
from models.pretrained.common import AttentionParams, Weights, activation, config_int, layer_norm, linear
from models.pretrained.layer_store import LayerStore
from models.pretrained.llama import lin

OFFSET = 2  # OPT's position table: position i is row i + 2


class OPT(Architecture):
    model_type = "opt"
    embedding = "opt"  # h₀ = word + position (at offset 2)
    position_offset = OFFSET  # the row position 0 reads (the positional-encoding lens)
    anchor = "embed_tokens.weight"
    default_mask = "causal"
    input_description = (
        "The true hidden state entering this layer, after the block's pre-attention LayerNorm "
        "(self_attn_layer_norm) when the model norms before (do_layer_norm_before)."
    )

    @property
    def wiring(self) -> Wiring:  # the residual stream's wiring (models.reads.why_stream)
        if not self.pre_norm:
            return Wiring("post", norms=("ln_attn", "ln_mlp"), ffn=("fc1", "fc2"))
        return Wiring("add", ("layer", "ln_attn"))

    def __init__(self, cfg: dict, w: Weights) -> None:
        d, h, _ = self.read_sizes(cfg)
        self.ffn = config_int(cfg, "ffn_dim")
        self.eps = 1e-5  # nn.LayerNorm's default: OPT does not set one
        self.act = activation(config_str(cfg, "activation_function", "relu"))
        self.pre_norm = config_bool(cfg, "do_layer_norm_before", True)
        self.input_formula = "X = LN₁(h_L)" if self.pre_norm else "X = h_L"
        self.affine = config_bool(cfg, "layer_norm_elementwise_affine", True)
        self.word_dim = config_int(cfg, "word_embed_proj_dim", default=d)
        final = self.pre_norm and not config_bool(cfg, "_remove_final_layer_norm", False)

        self.embed_tokens = w.stored("embed_tokens.weight", self.vocab_size, self.word_dim)
        self.positions = w.take("embed_positions.weight", self.max_positions + OFFSET, d)
        self.project_in = self.project_out = None
        if self.word_dim != d:
            self.project_in = w.take("project_in.weight", d, self.word_dim).t()
            self.project_out = w.take("project_out.weight", self.word_dim, d).t()
        self.ln_f = self.norm(w, "final_layer_norm") if final else None
        self.layers = LayerStore(self.load_layer, self.num_layers, w)

    def norm(self, w: Weights, name: str) -> tuple[Tensor | None, Tensor | None]:
        if not self.affine:
            return None, None
        return w.take(name + ".weight", self.hidden_size), w.take(name + ".bias", self.hidden_size)

    def load_layer(self, i: int, w: Weights) -> dict:
        p, d = f"layers.{i}.", self.hidden_size
        return {
            "q": lin(w, p + "self_attn.q_proj", d, d),
            "k": lin(w, p + "self_attn.k_proj", d, d),
            "v": lin(w, p + "self_attn.v_proj", d, d),
            "o": lin(w, p + "self_attn.out_proj", d, d),
            "ln_attn": self.norm(w, p + "self_attn_layer_norm"),
            "ln_mlp": self.norm(w, p + "final_layer_norm"),
            "fc1": lin(w, p + "fc1", d, self.ffn),
            "fc2": lin(w, p + "fc2", self.ffn, d),
        }

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        return self.embed_at(ids, 0)

    def embed_at(self, ids: Tensor, start: int) -> Tensor:
        x = self.embed_tokens[ids].to(torch.float32)  # (n, word_dim)
        if self.project_in is not None:
            x = x @ self.project_in  # (n, d)
        pos = torch.arange(start, start + ids.shape[0], device=ids.device) + self.position_offset
        return x + self.positions[pos]

    tied_default = True  # OPTForCausalLM ties its head to the token embeddings

    def input_embeddings(self) -> Tensor:
        return self.embed_tokens

    def ln(self, x: Tensor, weights: tuple[Tensor | None, Tensor | None]) -> Tensor:
        return layer_norm(x, *weights, self.eps)

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        return self.ln(h, self.layers[i]["ln_attn"]) if self.pre_norm else h

    def attention_params(self, i: int, n: int) -> AttentionParams:
        return self.layer_params(self.layers[i])

    def block(self, i: int, h: Tensor, hidden: Tensor, cache=None) -> Tensor:
        L = self.layers[i]
        h = h + self.self_attention(i, self.attention_input(i, h), hidden, cache)
        if not self.pre_norm:
            h = self.ln(h, L["ln_attn"])
        x = self.ln(h, L["ln_mlp"]) if self.pre_norm else h
        h = h + linear(self.act(linear(x, *L["fc1"])), *L["fc2"])
        return h if self.pre_norm else self.ln(h, L["ln_mlp"])

    def final(self, h: Tensor) -> Tensor:
        if self.ln_f is not None:
            h = self.ln(h, self.ln_f)
        return h @ self.project_out if self.project_out is not None else h
