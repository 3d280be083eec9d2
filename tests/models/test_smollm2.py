"""SmolLM2-135M-Instruct (a trained 30-layer LLaMA, Q4_1 GGUF) opened here and by transformers from the
same file (``gguf_file=``): the same token ids as AutoTokenizer, every layer's attention and a traced
layer's stages to 1e-5, the same greedy tokens, the logit lens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from generate_refs import lens_logits
from real_models import smollm2

from models.api import load
from models.generate import GenerateSettings, generate
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")

SENTENCE = "The quick brown fox jumps over the lazy dog because it was bored."
PROMPT = "The capital of France is"
NEW = 8


@pytest.fixture(scope="module")
def smol():
    path = smollm2()
    ref = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                            attn_implementation="eager").eval()  # fmt: skip
    return path, load_model(path, device="cpu"), ref


def test_the_config_is_transformers(smol):
    _, ours, ref = smol
    c = ref.config
    assert (ours.model_type, ours.num_layers, ours.num_heads) == ("llama", c.num_hidden_layers, c.num_attention_heads)
    assert (ours.arch.num_kv_heads, ours.arch.head_dim, ours.arch.vocab_size) == (3, 64, 49152)
    assert ours.arch.eps == pytest.approx(c.rms_norm_eps)


def test_token_ids_equal_autotokenizer(smol):
    path, ours, _ = smol
    ref_tok = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    for text in (SENTENCE, PROMPT, "naïve café — 1234 tokens!\n  two  spaces", "<|im_start|>user\nhi<|im_end|>"):
        assert list(ours.tokenizer.encode(text, 10_000).ids) == ref_tok(text).input_ids


def test_every_layer_s_attention_and_a_traced_layer_equal_transformers(smol):
    path, ours, ref = smol
    enc, weights, _ = ours.layer_weights(SENTENCE)
    with torch.no_grad():
        out = ref(torch.tensor([list(enc.ids)]), output_attentions=True)
    theirs = np.stack([a[0].numpy() for a in out.attentions])
    np.testing.assert_allclose(weights, theirs, atol=1e-5, rtol=0)
    trace = load(path, device="cpu").trace(SENTENCE, layer=16)
    np.testing.assert_allclose(trace.stage("weights"), theirs[16], atol=1e-5, rtol=0)
    assert trace.tokens == tuple(enc.tokens)


def test_greedy_generation_and_the_lens_equal_transformers(smol):
    _, ours, ref = smol
    gen = generate(ours, PROMPT, GenerateSettings(max_new_tokens=NEW))
    prompt = torch.tensor([gen.ids[: gen.prompt_length]])
    with torch.no_grad():
        out = ref.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=NEW,
                           pad_token_id=2)  # fmt: skip
        forward = ref(torch.tensor([gen.ids]), output_hidden_states=True)
    assert gen.ids == out[0].tolist()
    n = gen.n
    for layer in (0, 16, 28):
        with torch.no_grad():
            probs = torch.softmax(lens_logits(ref, forward.hidden_states[layer + 1][0]), -1).numpy()
        np.testing.assert_allclose(gen.lens_prob[layer][: n - 1], probs[np.arange(n - 1), gen.ids[1:]], atol=1e-5)
