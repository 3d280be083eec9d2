"""Gemma 3 270M (a trained 18-layer Gemma 3, Q4_K_M GGUF with a SentencePiece vocabulary of 262,144 tokens)
opened here and by transformers from the same file (``gguf_file=``): the same token ids as AutoTokenizer on
a varied text set, every layer's attention and a traced layer's stages to 1e-5, the same greedy tokens, the
logit lens. One model of each kind for the module (the file is 253 MB; transformers dequantizes it whole)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from generate_refs import lens_logits
from real_models import gemma3
from tokenizer_texts import TEXTS

from models.api import load
from models.generate import GenerateSettings, generate
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")

SENTENCE = "The quick brown fox jumps over the lazy dog because it was bored."
PROMPT = "The capital of France is"
NEW = 6


@pytest.fixture(scope="module")
def gemma():
    path = gemma3()
    ref = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                            attn_implementation="eager").eval()  # fmt: skip
    return path, load_model(path, device="cpu"), ref


def test_the_config_is_transformers(gemma):
    _, ours, ref = gemma
    c = ref.config
    assert (ours.model_type, ours.num_layers, ours.num_heads) == ("gemma3_text", c.num_hidden_layers,
                                                                 c.num_attention_heads)  # fmt: skip
    assert (ours.num_layers, ours.num_heads, ours.arch.num_kv_heads, ours.arch.head_dim) == (18, 4, 1, 256)
    assert ours.arch.vocab_size == c.vocab_size == 262144


def test_token_ids_equal_autotokenizer(gemma):
    path, ours, _ = gemma
    ref_tok = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    for text in (*TEXTS, "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"):
        assert list(ours.tokenizer.encode(text, 10_000).ids) == ref_tok(text).input_ids, text
        assert ours.tokenizer.decode(ref_tok(text).input_ids) == ref_tok.decode(ref_tok(text).input_ids)


def test_every_layer_s_attention_and_a_traced_layer_equal_transformers(gemma):
    path, ours, ref = gemma
    enc, weights, _ = ours.layer_weights(SENTENCE)
    with torch.no_grad():
        out = ref(torch.tensor([list(enc.ids)]), output_attentions=True)
    theirs = np.stack([a[0].numpy() for a in out.attentions])
    assert theirs.shape == (18, 4, len(enc.ids), len(enc.ids))
    np.testing.assert_allclose(weights, theirs, atol=1e-5, rtol=0)
    trace = load(path, device="cpu").trace(SENTENCE, layer=5)  # a global layer (every 6th; the others slide)
    np.testing.assert_allclose(trace.stage("weights"), theirs[5], atol=1e-5, rtol=0)
    assert trace.tokens == tuple(enc.tokens)


def test_greedy_generation_and_the_lens_equal_transformers(gemma):
    _, ours, ref = gemma
    gen = generate(ours, PROMPT, GenerateSettings(max_new_tokens=NEW))
    prompt = torch.tensor([gen.ids[: gen.prompt_length]])
    with torch.no_grad():
        out = ref.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=NEW,
                           pad_token_id=0)  # fmt: skip
        forward = ref(torch.tensor([gen.ids]), output_hidden_states=True)
    assert gen.ids == out[0].tolist()
    n, rows = gen.n, np.arange(gen.n - 1)
    for layer in (0, 9, 16):
        with torch.no_grad():
            probs = torch.softmax(lens_logits(ref, forward.hidden_states[layer + 1][0]), -1).numpy()
        np.testing.assert_allclose(gen.lens_prob[layer][: n - 1], probs[rows, gen.ids[1:]], atol=1e-5)
    # the last layer's lens is the model's own output (transformers' last hidden state is already normed)
    last = torch.softmax(forward.logits[0].float(), -1).numpy()
    np.testing.assert_allclose(gen.lens_prob[17][: n - 1], last[rows, gen.ids[1:]], atol=1e-5)
