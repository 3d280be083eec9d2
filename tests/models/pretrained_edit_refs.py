"""Independent references for edits of a pretrained layer: transformers' own modules, step by step.

``hf_stages(hf, layer, ids, edits)`` computes one layer's attention stages from the Hugging Face
model's hidden states and its own projection, norm and rotary modules, applying each edit where
its stage is computed (its own code, not models/). Builders for small random models too.
"""

from __future__ import annotations

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

WORDS = ["<s>", "the", "cat", "sat", "on", "mat", "a", "dog", "was", "walking", "in", "park", "."]
SENTENCE = "the cat sat on the mat a dog was walking in the park"


def build_decoder(folder, kind: str = "llama"):
    """A random 2-layer LLaMA (or Qwen3: qk-norm) with grouped-query attention (4 query heads,
    2 key/value heads), saved with save_pretrained plus a word-level tokenizer.json; the model."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    common = dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                  initializer_range=0.3)  # fmt: skip
    torch.manual_seed(0)
    if kind == "llama":
        hf = transformers.LlamaModel(transformers.LlamaConfig(**common))
    else:
        hf = transformers.Qwen3Model(transformers.Qwen3Config(**common, head_dim=8))
    hf.eval().save_pretrained(folder)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    return hf


def _edited(edits, name: str, tensor: torch.Tensor) -> torch.Tensor:
    cells = [e for e in edits if e.stage == name]
    if not cells:
        return tensor
    tensor = tensor.clone()
    for e in cells:
        tensor[e.cell] = e.value
    return tensor


@torch.no_grad()
def hf_stages(hf, layer: int, ids: list[int], edits=(), hidden: torch.Tensor | None = None) -> dict:
    """``{stage: numpy}`` for the traced layer of a BERT or a LLaMA/Qwen3 model, edits applied.
    ``hidden``: the layer's mask (True = hidden); default: none for BERT, causal for decoders."""
    n = len(ids)
    ed = lambda name, t: _edited(edits, name, t)  # noqa: E731
    states = hf(torch.tensor([ids]), output_hidden_states=True).hidden_states[layer][0]  # (n, d_model)
    bert = hasattr(hf, "encoder")
    out = {}
    if bert:
        block = hf.encoder.layer[layer].attention
        proj = block.self.query, block.self.key, block.self.value
        heads = kv = block.self.num_attention_heads
        d = block.self.attention_head_size
        o_proj, scale, x = block.output.dense, 1 / math.sqrt(d), states
    else:
        attn = hf.layers[layer].self_attn
        proj = attn.q_proj, attn.k_proj, attn.v_proj
        d = attn.head_dim
        heads, kv = attn.q_proj.out_features // d, attn.k_proj.out_features // d
        o_proj, scale, x = attn.o_proj, attn.scaling, hf.layers[layer].input_layernorm(states)
    x = out["input"] = ed("input", x)
    q, k, v = (ed(name, p(x).view(n, -1, d).transpose(0, 1)) for name, p in zip("qkv", proj, strict=True))
    out |= {"q": q, "k": k, "v": v}
    if not bert and hasattr(attn, "q_norm"):
        q, k = ed("q_normed", attn.q_norm(q)), ed("k_normed", attn.k_norm(k))
        out |= {"q_normed": q, "k_normed": k}
    if not bert:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        cos, sin = hf.rotary_emb(x[None], torch.arange(n)[None])
        q, k = (t[0] for t in apply_rotary_pos_emb(q[None], k[None], cos, sin))
        q, k = ed("q_rotated", q), ed("k_rotated", k)
        out |= {"q_rotated": q, "k_rotated": k}
    rep = heads // kv
    k_all, v_all = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)  # (h, n, d)
    if hidden is None:
        hidden = torch.zeros(n, n, dtype=torch.bool) if bert else torch.ones(n, n, dtype=torch.bool).triu(1)
    hidden = hidden.clone()
    for e in edits:
        if e.stage == "mask":
            hidden[e.cell] = bool(e.value)
    scores = ed("scores", q @ k_all.transpose(-1, -2))  # (h, n, n)
    scaled = scores * scale
    masked = scaled.masked_fill(hidden, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    head_output = weights @ v_all  # (h, n, d)
    concat = head_output.transpose(0, 1).reshape(n, heads * d)
    w_o = o_proj.weight.T  # (h·d, d_model)
    f = torch.stack([v_all[i] @ w_o[i * d : (i + 1) * d] for i in range(heads)])  # (h, n, d_model): f_h(x_j)
    weighted = torch.linalg.vector_norm(weights[..., None] * f[:, None], dim=-1)  # ‖α_ij f_h(x_j)‖
    out |= {"scores": scores, "scaled": scaled, "masked": masked, "weights": weights, "head_output": head_output,
            "concat": concat, "output": o_proj(concat), "weighted_norms": weighted,
            "value_norms": torch.linalg.vector_norm(f, dim=-1)}  # fmt: skip
    return {name: t.detach().numpy() for name, t in out.items()}
