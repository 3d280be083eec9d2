"""The real-model gate on Gemma 3 270M's GGUF file (SentencePiece vocabulary, 18 layers of 4 query heads
sharing 1 key/value head, sliding-window layers between global ones): export, explain, why and generate on
the file directly (the atlas command, the same code on every family, runs in SmolLM2's gate),
each one's numbers equal to the API's on the same file, and what its trained weights show on a repeated
random-token text: induction heads, which random weights never have."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from real_models import gemma3, repeated_random_tokens

from main import main
from models.api import load
from models.pretrained.tokenizer import Encoded
from models.reads.detectors import induction_pattern, pattern_score

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def path():
    return gemma3()


@pytest.fixture(scope="module")
def api(path):
    return load(path, device="cpu")


@pytest.fixture(scope="module")
def trace5(api):
    return api.trace(SENTENCE, layer=5)


def test_induction_heads_on_a_repeated_text(api):
    model = api.engine
    ids = [model.tokenizer.encode("x", 10).ids[0], *repeated_random_tokens(model.arch.vocab_size)]  # <bos> first
    enc = Encoded(tuple(model.tokenizer.token(i) for i in ids), tuple(ids), (0,) * len(ids))
    _, weights, _ = model.layer_weights(enc)  # (18, 4, 49, 49)
    assert weights.shape == (18, 4, 49, 49)
    induction = pattern_score(weights, induction_pattern(ids))
    assert induction.max() > 0.3 and induction.max() > 10 * np.median(induction)


def test_export_all_layers_explain_and_why(path, trace5, tmp_path, capsys):
    every = tmp_path / "all"
    assert main(["export", "--model", str(path), "--sentence", SENTENCE, "--all-layers", "--out", str(every)]) == 0
    attention = np.load(every / "attention.npy")
    n = len(trace5.tokens)
    assert attention.shape == (18, 4, n, n) and trace5.tokens[0] == "<bos>"
    np.testing.assert_allclose(attention[5], trace5.stage("weights"), atol=1e-6)
    with open(every / "heads.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 72
    capsys.readouterr()
    argv = ["--model", str(path), "--sentence", SENTENCE, "--layer", "5", "--cell", "0,5,4", "--json"]
    assert main(["explain", "--stage", "weights", *argv]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert explained["value"] == pytest.approx(float(trace5.stage("weights")[0, 5, 4]), rel=1e-6)
    assert main(["why", *argv]) == 0
    why = json.loads(capsys.readouterr().out)
    assert why["score"] == pytest.approx(trace5.why(0, 5, 4)["score"], rel=1e-6)


def test_generate(path, api, tmp_path):
    out = tmp_path / "gen"
    assert main(["generate", "--model", str(path), "--prompt", "The capital of France is", "--max-new-tokens", "3",
                 "--out", str(out)]) == 0  # fmt: skip
    want = api.generate("The capital of France is", max_new_tokens=3)
    assert json.loads((out / "tokens.json").read_text())["ids"] == list(want.ids)
