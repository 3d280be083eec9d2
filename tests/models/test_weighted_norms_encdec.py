"""Encoder-decoder traces have ``weighted_norms`` and ``value_norms`` too (issue 44, item 12), as
docs/atlas.md says every trace has: ‖a_ij f_h(x_j)‖ with f_h(x) = (x W_V^h + b_V^h) W_O^h, in every
block (encoder, decoder, cross) of every encoder-decoder family of the registry.

The reference is transformers' own forward pass: the values are what its value projection returned
(a hook on the module), W_O^h the columns of its output projection that head h feeds, the weights its
``output_attentions``; nothing of ours computes them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from encdec_refs import SOURCE, TARGET, build, reference
from zoo import cases

from models import api

transformers = pytest.importorskip("transformers")


def attention_modules(model, block: str, layer: int):
    """transformers' attention module of ``block`` layer ``layer`` and its (value, output) projections."""
    if model.config.model_type in ("t5", "mt5"):
        stack = model.encoder if block == "encoder" else model.decoder
        module = stack.block[layer].layer[1 if block == "cross" else 0]
        attn = module.EncDecAttention if block == "cross" else module.SelfAttention
        return attn.v, attn.o
    stack = model.model.encoder if block == "encoder" else model.model.decoder
    attn = getattr(stack.layers[layer], "encoder_attn" if block == "cross" else "self_attn")
    return attn.v_proj, attn.out_proj


@pytest.mark.parametrize("case", cases("encoder-decoder"))
def test_every_block_has_them_equal_to_transformers(tmp_path, case):
    ref, tok = build(tmp_path, case)
    model = api.load(tmp_path, device="cpu")
    layer = 1
    for block in ("encoder", "decoder", "cross"):
        v_proj, o_proj = attention_modules(ref, block, layer)
        seen: list[torch.Tensor] = []
        hook = v_proj.register_forward_hook(lambda _m, _i, out, seen=seen: seen.append(out[0].detach().double()))
        try:
            out = reference(ref, tok)
        finally:
            hook.remove()
        values = seen[-1] if block == "cross" else seen[0]  # the decoder's cross values: from its last call
        attentions = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions,
                      "cross": out.cross_attentions}[block][layer][0].double()  # (h, n_q, n_k)  # fmt: skip
        heads = attentions.shape[0]
        d_k = values.shape[-1] // heads
        w_o = o_proj.weight.detach().double()  # (d_model, h·d_k): y = x W^T
        f = torch.stack([values[:, i * d_k : (i + 1) * d_k] @ w_o[:, i * d_k : (i + 1) * d_k].T
                         for i in range(heads)])  # (h, n_k, d_model)  # fmt: skip
        norms = torch.linalg.vector_norm(f, dim=-1)  # (h, n_k)
        weighted = attentions * norms[:, None, :]  # (h, n_q, n_k)
        trace = model.trace(SOURCE, layer, block=block, cross_sentence=TARGET)
        assert trace.stages.index("weights") + 1 == trace.stages.index("weighted_norms")
        np.testing.assert_allclose(trace.stage("value_norms"), norms.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(trace.stage("weighted_norms"), weighted.numpy(), rtol=1e-4, atol=1e-6)
