"""Tiny random models of the families of issue 23 (part a), built with transformers.

Each config exercises the family's own step: MoE routing with several experts and top-k > 1 (a
shared expert, a dense layer between routed ones, renormalised top-k), norms on the whole q and
k projections, rotary-free layers, Granite's multipliers ≠ 1, partial rotary, per-head q/k
LayerNorms, parallel residuals, interleaved rotary pairs, and windows shorter than the sentence.
"""

from __future__ import annotations

import pytest
import torch
from test_pretrained_families import DECODER, WINDOW, make_tokenizer

transformers = pytest.importorskip("transformers")

MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)
SPECIALS = dict(pad_token_id=1, bos_token_id=0, eos_token_id=2)  # the test tokenizer's ids

# name: (model_type, config class, kwargs)
NEWER = {
    "olmo2-gqa": ("olmo2", "Olmo2Config", dict(DECODER, num_key_value_heads=2, **SPECIALS)),
    "smollm3-nope-window": ("smollm3", "SmolLM3Config",
                            dict(DECODER, num_key_value_heads=2, no_rope_layer_interval=2,
                                 use_sliding_window=True, sliding_window=WINDOW, **SPECIALS)),
    "granite-multipliers": ("granite", "GraniteConfig",
                            dict(DECODER, num_key_value_heads=2, embedding_multiplier=3.0,
                                 attention_multiplier=0.2, residual_multiplier=0.5, logits_scaling=4.0)),
    "qwen2_moe-shared-window": ("qwen2_moe", "Qwen2MoeConfig",
                                dict(DECODER, **MOE, num_key_value_heads=2, shared_expert_intermediate_size=24,
                                     mlp_only_layers=[1], use_sliding_window=True, sliding_window=WINDOW,
                                     max_window_layers=2)),
    "qwen3_moe-qknorm-topk": ("qwen3_moe", "Qwen3MoeConfig",
                              dict(DECODER, **MOE, num_key_value_heads=2, head_dim=16, norm_topk_prob=True)),
    "starcoder2-window": ("starcoder2", "Starcoder2Config",
                          dict(DECODER, num_key_value_heads=2, sliding_window=WINDOW, **SPECIALS)),
    "stablelm-qknorm-partial": ("stablelm", "StableLmConfig",
                                dict(DECODER, num_key_value_heads=2, qk_layernorm=True, use_qkv_bias=True,
                                     partial_rotary_factor=0.5)),
    "stablelm-parallel": ("stablelm", "StableLmConfig",
                          dict(DECODER, num_key_value_heads=4, use_parallel_residual=True)),
    "cohere-qknorm": ("cohere", "CohereConfig",
                      dict(DECODER, num_key_value_heads=2, use_qk_norm=True, logit_scale=0.5, **SPECIALS)),
}  # fmt: skip


def build(folder, name):
    """Save a random ``name`` model and a tokenizer.json into ``folder``; return transformers' copy."""
    model_type, cls_name, kwargs = NEWER[name]
    torch.manual_seed(0)
    tok = make_tokenizer(False)
    config = getattr(transformers, cls_name)(vocab_size=tok.get_vocab_size(), **kwargs)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():  # biases and norm weights start at 0 or 1: make them bite
        for key, param in model.named_parameters():
            if param.dim() == 1 or "norm" in key:  # Cohere's q/k norms are (heads, d_k)
                param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
