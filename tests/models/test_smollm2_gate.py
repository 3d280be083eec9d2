"""The real-model gate: every command on SmolLM2-135M-Instruct's GGUF file directly, and the heads its
trained weights really have (what random weights never show): a sink on the first token (there is no BOS),
the previous-token head L16 H0 and the induction heads of layers 17-18, found by the atlas detectors'
patterns on a repeated random-token text. Each command's numbers equal the API's on the same file."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from real_models import repeated_random_tokens, smollm2

from main import main
from models.api import load
from models.pretrained import load_model
from models.pretrained.tokenizer import Encoded
from models.reads.detectors import induction_pattern, pattern_score, previous_pattern

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def path():
    return smollm2()


@pytest.fixture(scope="module")
def trace16(path):
    return load(path, device="cpu").trace(SENTENCE, layer=16)


def test_the_trained_heads_are_where_the_docs_say(path):
    model = load_model(path, device="cpu")
    ids = repeated_random_tokens(model.arch.vocab_size)
    enc = Encoded(tuple(model.tokenizer.token(i) for i in ids), tuple(ids), (0,) * len(ids))
    _, weights, _ = model.layer_weights(enc)  # (30, 9, 48, 48)
    previous = pattern_score(weights, previous_pattern(ids))
    induction = pattern_score(weights, induction_pattern(ids))
    assert np.unravel_index(previous.argmax(), previous.shape) == (16, 0) and previous[16, 0] > 0.8
    top = np.argsort(-induction, axis=None)[:4]
    assert {int(i) // 9 for i in top} <= {17, 18} and induction.max() > 0.4
    assert induction.max() > 10 * np.median(induction)
    sink = weights[:, :, 1:, 0].mean(-1)  # the share of attention each head puts on the first token
    assert np.median(sink[3:]) > 0.4 and (sink > 0.9).sum() >= 5


def test_export_a_layer_and_all_layers(path, trace16, tmp_path):
    out = tmp_path / "l16"
    assert main(["export", "--model", str(path), "--sentence", SENTENCE, "--layer", "16", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["key_tokens"] == list(trace16.tokens) and manifest["config"]["model_type"] == "llama"
    np.testing.assert_array_equal(np.load(out / "weights.npy"), trace16.stage("weights"))
    every = tmp_path / "all"
    assert main(["export", "--model", str(path), "--sentence", SENTENCE, "--all-layers", "--out", str(every)]) == 0
    attention = np.load(every / "attention.npy")
    assert attention.shape == (30, 9, len(trace16.tokens), len(trace16.tokens))
    np.testing.assert_allclose(attention[16], trace16.stage("weights"), atol=1e-6)
    with open(every / "heads.csv", newline="") as f:
        rows = {(int(r["layer"]), int(r["head"])): r for r in csv.DictReader(f)}
    assert len(rows) == 270 and float(rows[16, 0]["previous"]) > 0.5  # the previous-token head, on prose too
    assert np.median([float(r["sink"]) for r in rows.values()]) > 0.3  # the sink column, without a BOS


def test_explain_and_why(path, trace16, capsys):
    argv = ["--model", str(path), "--sentence", SENTENCE, "--layer", "16", "--cell", "0,5,4", "--json"]
    assert main(["explain", "--stage", "weights", *argv]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert explained["value"] == pytest.approx(float(trace16.stage("weights")[0, 5, 4]), rel=1e-6)
    assert main(["why", *argv]) == 0
    why = json.loads(capsys.readouterr().out)
    assert why["score"] == pytest.approx(trace16.why(0, 5, 4)["score"], rel=1e-6)
    assert np.sum(why["table"]) == pytest.approx(float(trace16.stage("scaled")[0, 5, 4]), rel=1e-4, abs=1e-5)


def test_atlas_on_a_repeated_text(path, tmp_path):
    model = load_model(path, device="cpu")
    text = model.tokenizer.decode(repeated_random_tokens(model.arch.vocab_size))
    corpus = tmp_path / "repeated.txt"
    corpus.write_text(text + "\n")
    out = tmp_path / "atlas"
    argv = ["atlas", "--model", str(path), "--corpus", str(corpus), "--no-detectors", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    with open(out / "heads.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 270
    best = max(rows, key=lambda r: float(r["previous_mean"]))
    assert (int(best["layer"]), int(best["head"])) == (16, 0)


def test_generate(path, tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--model", str(path), "--prompt", "The capital of France is", "--max-new-tokens", "4",
                 "--out", str(out)]) == 0  # fmt: skip
    model = load(path, device="cpu")
    want = model.generate("The capital of France is", max_new_tokens=4)
    written = json.loads((out / "tokens.json").read_text())
    assert written["ids"] == list(want.ids)
    assert "Paris" in model.engine.tokenizer.decode(want.ids)
