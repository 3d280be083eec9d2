"""Every supported family, built at random with transformers, must match it layer by layer.

One parametrised test: each config exercises the family's own step (biases, grouped-query heads,
qk-norm, a sliding window shorter than the sentence, soft-capping that bites, partial rotary,
fused projections, RoBERTa's position offset, parallel residual). The model is saved with
``save_pretrained`` plus a small BPE tokenizer.json, loaded with models.pretrained, and every
layer's attention weights and the hidden states are compared with transformers' eager
attention (``output_attentions=True``) to 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.pretrained import load_model
from models.pretrained.loader import family_kind

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from zoo import WINDOW, table  # noqa: E402

SENTENCE = "the cat sat on the mat while a dog was walking in the park"
CORPUS = [
    "the cat sat on the mat",
    "a dog is walking in the park",
    "attention is all you need",
    "hello world, the cats and the dogs",
] * 4



def make_tokenizer(encoder: bool) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<s>", "<pad>", "</s>"],  # RoBERTa's ids: <s> 0, <pad> 1, </s> 2
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    single = "<s> $A </s>" if encoder else "<s> $A"
    tok.post_processor = processors.TemplateProcessing(
        single=single, special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return tok


FAMILIES = table("test_pretrained_families")  # name: zoo Case (tests/models/zoo.py)


def build(folder, name, families=FAMILIES):
    """A random model of zoo case ``name`` saved in ``folder`` with a tokenizer, and transformers' model of it."""
    model_type, cls_name, kwargs, _ = families[name]
    torch.manual_seed(0)
    tok = make_tokenizer(family_kind(model_type) == "encoder")
    config = getattr(transformers, cls_name)(vocab_size=tok.get_vocab_size(), **kwargs)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():  # biases and norm weights start at 0 or 1: make them bite
        for key, param in model.named_parameters():
            if key.endswith("sinks"):  # large sinks: they take a real share of every row
                param.copy_(2.0 * torch.randn_like(param))
            elif param.dim() == 1 or key.endswith("_bias"):
                param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()





@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_matches_transformers(tmp_path, name):
    model_type = FAMILIES[name][0]
    ref = build(tmp_path, name)
    model = load_model(tmp_path, device="cpu")
    assert model.model_type == model_type and model.num_layers == 3
    _, ids = model.tokenize(SENTENCE)
    n = len(ids)
    assert n > WINDOW + 2
    with torch.no_grad():
        out = ref(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for layer in range(model.num_layers):
        trace = model.trace(SENTENCE, layer)
        np.testing.assert_allclose(
            trace["weights"].array, out.attentions[layer][0].numpy(), atol=1e-5, rtol=0
        )
        check_family_stages(name, trace, layer, n)
    states = model.hidden_states(SENTENCE)
    assert len(states) == len(out.hidden_states) == model.num_layers + 1
    for mine, theirs in zip(states, out.hidden_states):
        np.testing.assert_allclose(mine, theirs[0].numpy(), atol=1e-5, rtol=0)


def window_hidden(n: int, w: int) -> np.ndarray:
    i = np.arange(n)
    return (i[:, None] - i[None, :]) >= w


def check_family_stages(name: str, trace, layer: int, n: int) -> None:
    """The family's own step shows as a stage (or in the mask) where it changes the numbers."""
    masked = trace["masked"].array
    window = trace.config["sliding_window"]
    sliding = {
        "qwen2-bias-gqa-window": layer >= 1,
        "mistral-window": True,
        "gemma2-softcap-window": layer % 2 == 0,
        "phi3-fused-partial-window": True,
    }.get(name, False)
    assert (window is not None) == sliding
    if sliding:
        hidden = window_hidden(n, window)
        assert hidden.any() and np.all(np.isneginf(masked[:, hidden]))
        assert f"j ≤ i − {window} (window {window})" in trace["masked"].formula
        assert f"a sliding window of {window}" in trace["masked"].description
    if name.startswith("qwen3"):
        assert trace.names.index("q_normed") < trace.names.index("q_rotated")
        rms = np.sqrt((trace["q_normed"].array ** 2).mean(-1))
        assert not np.allclose(trace["q"].array, trace["q_normed"].array)
        assert rms.std() < 0.5  # normed rows have comparable scale
    else:
        assert "q_normed" not in trace
    if name.startswith("gemma2"):
        scaled, capped = trace["scaled"].array, trace["softcapped"].array
        assert np.abs(scaled).max() > 1.5  # the cap bites
        np.testing.assert_allclose(capped, 1.5 * np.tanh(scaled / 1.5), atol=1e-6)
        assert trace.names.index("softcapped") + 1 == trace.names.index("masked")
        visible = np.isfinite(masked)
        np.testing.assert_array_equal(masked[visible], capped[visible])  # the mask applies to the capped scores
    else:
        assert "softcapped" not in trace
    if name.startswith(("phi3", "gpt_neox")):
        rd, dk = trace.config["rotary_dim"], trace.config["d_k"]
        assert rd < dk and f"first r = {rd}" in trace["q_rotated"].description
        # the features past rotary_dim pass unchanged
        np.testing.assert_array_equal(trace["q"].array[..., rd:], trace["q_rotated"].array[..., rd:])
    if name.startswith("qwen2"):
        assert trace.config["bias"] and "+ b_Q" in trace["q"].formula


def test_roberta_positions_skip_the_padding_index(tmp_path):
    build(tmp_path, "roberta")
    model = load_model(tmp_path, device="cpu")
    assert model.max_positions == 40 - 1 - 1  # max_position_embeddings − padding_idx − 1
    long = " ".join(["the cat sat on the mat"] * 20)
    trace = model.trace(long, 0)
    assert len(trace.query_tokens) == 38 and "truncated" in trace.meta["notices"][0]
