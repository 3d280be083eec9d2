"""Falcon with ALiBi (``alibi: true``, Falcon-RW) against transformers: every layer's weights, the
``biased`` stage, every hidden state, greedy generation and its attention rows, and the long path.

transformers 5's eager Falcon adds the ALiBi bias twice (in its mask and again in the scores; the last
test keeps watch), so these models are not rows of the zoo, whose references are eager. The reference
is transformers' sdpa path, which adds it once as Falcon-RW's own code does: its hidden states and
generated ids, and each layer's weights ``softmax(q kᵀ / √d_k + mask)`` from the very q, k and mask
transformers hands to torch's ``scaled_dot_product_attention`` (PyTorch's definition of that call).
16 heads: the slopes are not powers of two, so Falcon's bfloat16 products bite.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from generate_refs import NEW_TOKENS, PROMPT, make_tokenizer, save_random

from models.engine import attend as attend_module
from models.engine import pairs
from models.generate import GenerateSettings, generate
from models.pretrained import load_model
from models.reads.explain import explain
from models.reads.params import pretrained_params

transformers = pytest.importorskip("transformers")

LAYOUTS = {
    "per-head": dict(multi_query=False, parallel_attn=True),
    "multi-query-sequential": dict(multi_query=True, parallel_attn=False),
    "new-gqa": dict(new_decoder_architecture=True, num_kv_heads=4, ffn_hidden_size=64),
}
HEADS = 16


def build(folder, layout: str, impl: str = "sdpa"):
    torch.manual_seed(0)
    tok = make_tokenizer()
    config = transformers.FalconConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, num_hidden_layers=3,
                                       num_attention_heads=HEADS, alibi=True, max_position_embeddings=40,
                                       initializer_range=0.2, bias=True, **LAYOUTS[layout])  # fmt: skip
    config.eos_token_id = tok.get_vocab_size() + 5  # never met: generation runs its full length
    return save_random(transformers, folder, config, tok, impl)


def reference_weights(ref, ids: list[int], monkeypatch) -> list[np.ndarray]:
    """Each layer's ``(h, n, n)`` weights from the inputs of transformers' sdpa calls."""
    seen = []
    fused = torch.nn.functional.scaled_dot_product_attention

    def recorded(q, k, v, attn_mask=None, **kwargs):
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + attn_mask  # k: one head broadcast (MQA)
        seen.append(torch.softmax(scores, -1)[0].numpy())
        return fused(q, k, v, attn_mask=attn_mask, **kwargs)

    with monkeypatch.context() as m, torch.no_grad():
        m.setattr(torch.nn.functional, "scaled_dot_product_attention", recorded)
        ref(torch.tensor([ids]))
    return seen


@pytest.fixture(scope="module", params=list(LAYOUTS))
def falcon(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    ref = build(folder, request.param)
    return ref, load_model(folder, device="cpu")


def test_every_layer_and_hidden_state_equals_transformers(falcon, monkeypatch):
    ref, model = falcon
    ids = model.encode(PROMPT).ids
    n = len(ids)
    theirs = reference_weights(ref, ids, monkeypatch)
    assert len(theirs) == model.num_layers
    falcon_module = transformers.models.falcon.modeling_falcon  # the slopes · positions as Falcon builds them
    slopes = falcon_module.build_alibi_tensor(torch.ones(1, n, dtype=torch.long), HEADS, torch.float32)
    for layer in range(model.num_layers):
        trace = model.trace(PROMPT, layer)
        assert trace.config["pe"] == "alibi" and "q_rotated" not in trace
        np.testing.assert_allclose(trace["weights"].array, theirs[layer], atol=1e-5, rtol=0)
        bias = trace["biased"].array - trace["scaled"].array  # (h, n, n): slope_h · j / √d_k, every row
        want = (slopes.view(HEADS, 1, n) / math.sqrt(64 // HEADS)).expand(HEADS, n, n).numpy()
        np.testing.assert_allclose(bias, want, atol=1e-5, rtol=0)
        assert "m_h · j" in trace["biased"].formula
        cell = (HEADS - 1, n - 1, 2)
        derived = explain(trace, pretrained_params(model, layer, n), "biased", cell)
        assert derived.value == pytest.approx(float(trace["biased"].array[cell]), abs=1e-6)
        assert sum(t.value for t in derived.sum_of) == pytest.approx(derived.value, abs=1e-5)
        assert derived.sum_of[1].value == pytest.approx(float(want[cell]), abs=1e-5) and "ALiBi" in derived.title
    with torch.no_grad():
        out = ref(torch.tensor([ids]), output_hidden_states=True)
    for mine, want in zip(model.hidden_states(PROMPT), out.hidden_states, strict=True):
        want = want[0].numpy()  # 1e-5 of the state's size (torch's sdpa kernel rounds apart from our scores)
        np.testing.assert_allclose(mine, want, atol=1e-5 * max(1.0, np.abs(want).max()), rtol=0)


def test_greedy_generation_and_its_rows_equal_transformers(falcon, monkeypatch):
    ref, model = falcon
    gen = generate(model, PROMPT, GenerateSettings(max_new_tokens=NEW_TOKENS))
    prompt = torch.tensor([gen.ids[: gen.prompt_length]])
    with torch.no_grad():
        out = ref.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                           max_new_tokens=NEW_TOKENS, pad_token_id=0)  # fmt: skip
    assert gen.ids == out[0].tolist() and gen.generated == NEW_TOKENS
    theirs = np.stack(reference_weights(ref, gen.ids, monkeypatch))  # one forward over the final sequence
    np.testing.assert_allclose(gen.attention(), theirs, atol=1e-5, rtol=0)


def test_the_long_path_equals_the_reference(falcon, monkeypatch):
    ref, model = falcon
    ids = model.encode(PROMPT).ids
    theirs = reference_weights(ref, ids, monkeypatch)
    monkeypatch.setattr(pairs, "LONG_CELLS", 0)  # the rows' statistics, the layers below in blocks
    monkeypatch.setattr(attend_module, "BLOCK_CELLS", 96)
    for layer in range(model.num_layers):
        weights = model.trace(PROMPT, layer)["weights"]
        assert weights.store.long is not None
        mine = np.stack([weights.head(h) for h in range(model.num_heads)])
        np.testing.assert_allclose(mine, theirs[layer], atol=1e-5, rtol=0)


def test_transformers_eager_falcon_alibi_is_not_the_reference(tmp_path):
    """When this fails, transformers' eager Falcon adds ALiBi once: these cases can join the zoo."""
    sdpa = build(tmp_path / "a", "per-head")
    eager = build(tmp_path / "b", "per-head", impl="eager")
    ids = torch.tensor([list(range(3, 15))])
    with torch.no_grad():
        gap = (sdpa(ids).logits - eager(ids).logits).abs().max()
    assert gap > 1e-3
