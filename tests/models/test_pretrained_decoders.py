"""Tiny random GPT-2 and LLaMA models built with transformers: our layers must match theirs.

Each model is saved with ``save_pretrained`` plus a small byte-level BPE tokenizer.json, loaded
with models.pretrained, and every layer's attention weights and the hidden states are compared
with transformers' eager attention (``output_attentions=True``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.pretrained import load_model

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

SENTENCE = "the cat sat on the mat while a dog was walking in the park"
CORPUS = [
    "the cat sat on the mat",
    "a dog is walking in the park",
    "attention is all you need",
    "hello world, the cats and the dogs",
    "walking talking sitting",
] * 4
MAX_POSITIONS = 32


def make_tokenizer(bos: bool) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    if bos:  # like LLaMA's tokenizer.json: the post-processor prepends <s>
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def gpt2(vocab: int, **extra):
    cfg = transformers.GPT2Config(
        vocab_size=vocab,
        n_positions=MAX_POSITIONS,
        n_embd=32,
        n_layer=2,
        n_head=4,
        initializer_range=0.3,
        **extra,
    )
    return cfg


def llama(vocab: int, **extra):
    args = dict(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        initializer_range=0.3,
    )
    args.update(extra)
    return transformers.LlamaConfig(**args)


LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8,
}
VARIANTS = {
    # name: (config builder, model class name, save as pytorch_model.bin)
    "gpt2": (lambda v: gpt2(v), "GPT2Model", False),
    "gpt2-lmhead-bin": (
        lambda v: gpt2(v, scale_attn_by_inverse_layer_idx=True, activation_function="gelu"),
        "GPT2LMHeadModel",
        True,
    ),
    "llama-gqa": (lambda v: llama(v), "LlamaModel", False),
    "llama-mqa-bias-llama3": (
        lambda v: llama(
            v,
            num_key_value_heads=1,
            head_dim=16,
            attention_bias=True,
            mlp_bias=True,
            rope_parameters=LLAMA3_ROPE,
        ),
        "LlamaForCausalLM",
        False,
    ),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{variant: (folder, transformers model)} built once for the whole module."""
    torch.manual_seed(0)
    out = {}
    for name, (make_config, cls_name, as_bin) in VARIANTS.items():
        tok = make_tokenizer(bos=name.startswith("llama"))
        config = make_config(tok.get_vocab_size())
        config._attn_implementation = "eager"  # transformers' own field (a reference library's, not the app's)
        model = getattr(transformers, cls_name)(config).eval()
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        if as_bin:  # the older checkpoint format, read with torch.load(weights_only=True)
            (folder / "model.safetensors").unlink()
            torch.save(model.state_dict(), folder / "pytorch_model.bin")
        tok.save(str(folder / "tokenizer.json"))
        ref = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
        out[name] = (folder, ref)
    return out


def reference(ref, ids):
    with torch.no_grad():
        return ref(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_layers_match_transformers(built, variant):
    folder, ref = built[variant]
    model = load_model(folder, device="cpu")
    assert model.model_type == ("gpt2" if variant.startswith("gpt2") else "llama")
    assert model.default_mask == "causal" and model.num_layers == 2
    tokens, ids = model.tokenize(SENTENCE)
    assert ("<s>" == tokens[0]) == variant.startswith("llama")
    assert any(t.startswith("Ġ") for t in tokens)
    out = reference(ref, ids)
    for layer in range(model.num_layers):
        trace = model.trace(SENTENCE, layer)
        np.testing.assert_allclose(
            trace["weights"].array, out.attentions[layer][0].numpy(), atol=1e-5, rtol=0
        )
        assert np.all(np.triu(trace["weights"].array, 1) == 0)  # causal by default
    states = model.hidden_states(SENTENCE)
    assert len(states) == len(out.hidden_states) == model.num_layers + 1
    for mine, theirs in zip(states, out.hidden_states):
        np.testing.assert_allclose(mine, theirs[0].numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(states[-1], out.last_hidden_state[0].numpy(), atol=1e-5, rtol=0)


def test_gpt2_stages(built):
    model = load_model(built["gpt2"][0], device="cpu")
    trace = model.trace(SENTENCE, 1)
    assert "q_rotated" not in trace and trace["k"].shape[0] == 4
    assert trace.config["bias"] and trace["output"].formula.endswith("+ b_O")
    assert trace.config["pe"] == "learned"


def test_llama_gqa_stages(built):
    model = load_model(built["llama-gqa"][0], device="cpu")
    assert (model.num_heads, model.num_kv_heads) == (4, 2)
    trace = model.trace(SENTENCE, 1)
    n = len(trace.query_tokens)
    assert trace.names == (
        "input",
        "q",
        "k",
        "v",
        "q_rotated",
        "k_rotated",
        "scores",
        "scaled",
        "masked",
        "weights",
        "weighted_norms",
        "value_norms",
        "head_output",
        "concat",
        "output",
    )
    assert trace["q"].shape == (4, n, 8) and trace["q_rotated"].shape == (4, n, 8)
    assert trace["k"].shape == (2, n, 8) and trace["v"].shape == (2, n, 8)
    assert trace["k_rotated"].shape == (2, n, 8)
    for name in ("q", "k", "v", "k_rotated", "scores", "weights"):
        assert trace[name].head_groups == (0, 0, 1, 1)
    assert trace.config["head_groups"] == [0, 0, 1, 1] and trace.config["kv_heads"] == 2
    assert not trace.config["bias"] and trace.config["pe"] == "rotary"
    # query head i is scored against the rotated keys of key head head_groups[i]
    q, k = trace["q_rotated"].array, trace["k_rotated"].array
    for i, g in enumerate(trace["scores"].head_groups):
        np.testing.assert_allclose(trace["scores"].array[i], q[i] @ k[g].T, atol=1e-5)
    # rotation keeps lengths: RoPE only turns each pair of dimensions
    np.testing.assert_allclose(
        np.linalg.norm(trace["q"].array, axis=-1), np.linalg.norm(q, axis=-1), rtol=1e-5
    )
    # position 0 is not rotated at all
    np.testing.assert_allclose(trace["q"].array[:, 0], q[:, 0], atol=1e-6)


def test_decoder_mask_override(built):
    model = load_model(built["llama-gqa"][0], device="cpu")
    trace = model.trace(SENTENCE, 0, mask="none")
    assert np.triu(trace["weights"].array, 1).sum() > 0
    assert any("replaces" in s for s in trace.meta["notices"])
    padded = model.trace(SENTENCE, 1, mask="padding", pad_positions=(2,))
    assert np.all(padded["weights"].array[:, :, 2] == 0)
    both = model.trace(SENTENCE, 1, pad_positions=(2,))  # causal + padding, like HF decoders
    assert np.all(both["weights"].array[:, :, 2] == 0) and np.all(
        np.triu(both["weights"].array, 1) == 0
    )


def test_decoder_truncates_long_sentence(built):
    folder, ref = built["gpt2"]
    model = load_model(folder, device="cpu")
    long = " ".join(["the cat sat on the mat"] * 20)
    trace = model.trace(long, 1)
    assert len(trace.query_tokens) == MAX_POSITIONS
    assert len(trace.meta["notices"]) == 1 and "truncated" in trace.meta["notices"][0]
    out = reference(ref, trace.meta["token_ids"])
    np.testing.assert_allclose(trace["weights"].array, out.attentions[1][0].numpy(), atol=1e-5)
