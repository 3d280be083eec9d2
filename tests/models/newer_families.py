"""Tiny random models of the families of issue 23 (part a), built with transformers.

Each config exercises the family's own step: MoE routing with several experts and top-k > 1 (a
shared expert, a dense layer between routed ones, renormalised top-k), norms on the whole q and
k projections, rotary-free layers, Granite's multipliers ≠ 1, partial rotary, per-head q/k
LayerNorms, parallel residuals, interleaved rotary pairs, and windows shorter than the sentence.
"""

from __future__ import annotations

import pytest
import torch
from test_pretrained_families import make_tokenizer
from zoo import table

transformers = pytest.importorskip("transformers")

NEWER = table("newer_families")  # name: zoo Case (tests/models/zoo.py)


def build(folder, name):
    """Save a random ``name`` model and a tokenizer.json into ``folder``; return transformers' copy."""
    model_type, cls_name, kwargs, _ = NEWER[name]
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
