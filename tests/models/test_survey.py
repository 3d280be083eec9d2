"""The whole model at once, against transformers: every layer's weights from ``export --all-layers``,
and its heads.csv and rollout.npy against the issue's formulas computed HERE from transformers'
own attentions (eager, output_attentions) — for MiniLM, a random GPT-2 and a random LLaMA."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from main import main
from models.files.survey_export import read_heads_csv
from models.pretrained import load_model, resolve_model
from models.reads.survey import METRIC_NAMES, all_layer_weights, head_metrics, rollout

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

SENTENCE = "the cat sat on the mat while a dog was walking in the park"
CORPUS = ["the cat sat on the mat", "a dog is walking in the park", "hello world, the cats and dogs"] * 4


# --- the formulas, written out head by head and row by row (independent of models.reads.survey) ---
def formula_metrics(a: np.ndarray) -> dict[str, float]:
    a = a.astype(np.float64)
    n = a.shape[0]
    rows = range(n)
    return {
        "entropy": np.mean([-sum(x * math.log(x) for x in a[i] if x > 0) for i in rows]),
        "max_weight": np.mean([a[i].max() for i in rows]),
        "self": np.mean([a[i, i] for i in rows]),
        "previous": np.mean([a[i, i - 1] for i in range(1, n)]),
        "first": np.mean([a[i, 0] for i in rows]),
        "distance": np.mean([sum(a[i, j] * abs(i - j) for j in range(n)) for i in rows]),
        "sink": np.mean([a[i, 0] for i in range(1, n)]),
    }


def formula_rollout(attentions: list[np.ndarray]) -> np.ndarray:
    out, r = [], None
    for a in attentions:  # a: (h, n, n)
        a_hat = 0.5 * a.astype(np.float64).mean(0) + 0.5 * np.eye(a.shape[-1])
        a_hat = a_hat / a_hat.sum(-1, keepdims=True)
        r = a_hat if r is None else a_hat @ r
        out.append(r)
    return np.stack(out)


def check_export_against(folder, attentions: list[np.ndarray]) -> None:
    weights = np.load(folder / "attention.npy")
    assert weights.shape == (len(attentions), *attentions[0].shape) and weights.dtype == np.float32
    for layer, theirs in enumerate(attentions):
        np.testing.assert_allclose(weights[layer], theirs, atol=1e-5, rtol=0)
    heads = read_heads_csv(folder / "heads.csv")
    for layer, theirs in enumerate(attentions):
        for head in range(theirs.shape[0]):
            expected = formula_metrics(theirs[head])
            for name in METRIC_NAMES:
                assert heads[name][layer, head] == pytest.approx(expected[name], abs=1e-5), (layer, head, name)
    np.testing.assert_allclose(np.load(folder / "rollout.npy"), formula_rollout(attentions), atol=1e-5, rtol=0)
    man = json.loads((folder / "manifest.json").read_text())
    assert man["metrics_version"] == 2 and len(man["tokens"]) == attentions[0].shape[-1]
    lines = (folder / "heads.csv").read_text().splitlines()
    assert lines[0] == "layer,head,entropy,max_weight,self,previous,first,distance,sink"
    assert len(lines) == 1 + len(attentions) * attentions[0].shape[0]
    assert lines[1].startswith("0,0,")


def export(tmp_path, model: str, sentence: str) -> tuple:
    out = tmp_path / "survey"
    assert main(["export", "--model", str(model), "--all-layers", "--sentence", sentence, "--out", str(out)]) == 0
    return out, json.loads((out / "manifest.json").read_text())


def test_minilm_export_matches_transformers(tmp_path):
    out, man = export(tmp_path, "minilm", "The quick brown fox was jumping over the sleeping dogs.")
    assert man["model"] == "minilm" and man["tokens"][0] == "[CLS]" and not man["decoder"]
    ref = transformers.AutoModel.from_pretrained(resolve_model("minilm"), attn_implementation="eager").eval()
    with torch.no_grad():
        got = ref(torch.tensor([man["token_ids"]]), output_attentions=True)
    check_export_against(out, [a[0].numpy() for a in got.attentions])


def make_tokenizer(bos: bool) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
        )
    return tok


def build(tmp_path, family: str):
    torch.manual_seed(1)
    tok = make_tokenizer(bos=family == "llama")
    v = tok.get_vocab_size()
    if family == "gpt2":
        config = transformers.GPT2Config(vocab_size=v, n_positions=32, n_embd=32, n_layer=3, n_head=4,
                                         initializer_range=0.3)  # fmt: skip
        model = transformers.GPT2Model(config)
    else:
        config = transformers.LlamaConfig(vocab_size=v, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                          initializer_range=0.3)  # fmt: skip
        model = transformers.LlamaModel(config)
    config._attn_implementation = "eager"  # transformers' own field (a reference library's, not the app's)
    folder = tmp_path / family
    model.eval().save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return folder, transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_decoder_export_matches_transformers(tmp_path, family):
    folder, ref = build(tmp_path, family)
    out, man = export(tmp_path, folder, SENTENCE)
    assert man["decoder"] and man["num_layers"] == 3 and man["mask"] == "causal"
    with torch.no_grad():
        got = ref(torch.tensor([man["token_ids"]]), output_attentions=True)
    check_export_against(out, [a[0].numpy() for a in got.attentions])


def test_layers_arrive_in_order_and_equal_single_layer_traces():
    model = load_model("minilm", device="cpu")
    model.clear_cache()
    seen = []
    tokens, weights = all_layer_weights(model, "A bird sang.", on_layer=lambda k, a: seen.append((k, a.copy())))
    assert [k for k, _ in seen] == list(range(6)) and weights.shape == (6, 12, len(tokens), len(tokens))
    for layer, a in seen:
        np.testing.assert_array_equal(a, weights[layer])
        np.testing.assert_array_equal(model.trace("A bird sang.", layer)["weights"].array, a)


def test_cancel_between_layers():
    from models.pretrained import Cancelled

    model = load_model("minilm", device="cpu")
    model.clear_cache()
    calls = []
    with pytest.raises(Cancelled):
        all_layer_weights(model, "Stop me please.", should_stop=lambda: len(calls) >= 2,
                          on_layer=lambda k, a: calls.append(k))  # fmt: skip
    assert calls == [0, 1]


# --- the formulas on small known matrices ----------------------------------------------------------
def test_metrics_on_known_matrices():
    n = 5
    uniform = np.full((n, n), 1 / n)
    shift = np.eye(n, k=-1)
    shift[0, 0] = 1.0  # row 0 looks at itself
    m = head_metrics(np.stack([uniform, np.eye(n), shift]))
    np.testing.assert_allclose(m["entropy"], [math.log(n), 0.0, 0.0], atol=1e-12)  # 0 ln 0 = 0
    np.testing.assert_allclose(m["max_weight"], [1 / n, 1, 1])
    np.testing.assert_allclose(m["self"], [1 / n, 1, 1 / n])
    np.testing.assert_allclose(m["previous"], [1 / n, 0, 1])
    np.testing.assert_allclose(m["first"], [1 / n, 1 / n, 2 / n])
    np.testing.assert_allclose(m["sink"], [1 / n, 0, 1 / (n - 1)])  # rows 1..n-1 on token 0
    np.testing.assert_allclose(m["distance"], [np.abs(np.subtract.outer(range(n), range(n))).mean(), 0, (n - 1) / n])


def test_metrics_vectorised_equal_formulas_and_keep_is_the_sub_matrix():
    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 7, 7)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    m = head_metrics(a)
    assert all(m[name].shape == (2, 3) for name in METRIC_NAMES)
    for layer in range(2):
        for head in range(3):
            expected = formula_metrics(a[layer, head])
            for name in METRIC_NAMES:
                assert m[name][layer, head] == pytest.approx(expected[name], abs=1e-9)
    keep = np.array([False, True, True, False, True, True, False])
    kept = head_metrics(a, keep=keep)
    sub = a[:, :, keep][:, :, :, keep]  # rows and key columns dropped, positions re-indexed 0..3
    for layer in range(2):
        for head in range(3):
            expected = formula_metrics(sub[layer, head])  # rows NOT renormalised
            # sink: the sequence's own first token (left out here), over the rows kept (1, 2, 4, 5)
            expected["sink"] = np.mean([float(a[layer, head, i, 0]) for i in (1, 2, 4, 5)])
            for name in METRIC_NAMES:
                assert kept[name][layer, head] == pytest.approx(expected[name], abs=1e-9)


def test_cross_attention_has_no_positional_metrics_and_no_rollout():
    a = np.full((2, 3, 4), 0.25)
    m = head_metrics(a)
    assert np.allclose(m["entropy"], math.log(4)) and np.isnan(m["self"]).all() and np.isnan(m["distance"]).all()
    with pytest.raises(ValueError):
        rollout(a[None])
    with pytest.raises(ValueError):
        head_metrics(a, keep=np.ones(3, bool))
