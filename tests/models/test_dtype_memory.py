"""``--dtype`` and memory (issue 45): the layer budget counts the dtype, so an 8B-shape LLaMA in bfloat16
is resident on a 24 GB card and told so, in float32 it streams and is told so (from its config alone:
no 8B weights anywhere); the option reaches ``generate``, ``export --all-layers``, ``trace`` and the api
from its one row, says the dtype, and is refused where it cannot apply."""

from __future__ import annotations

import numpy as np
import pytest
from generate_refs import PROMPT, build

from main import main
from models import api
from models.config import InputError
from models.memory import LAYER_BUDGET_ENV, layer_budget
from models.pretrained.plan import residency_from_config

transformers = pytest.importorskip("transformers")

# Llama-3.1-8B's shape: 32 layers, d 4096, 32 query / 8 key-value heads, MLP 14,336, vocabulary 128,256
LLAMA_8B = dict(model_type="llama", num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                num_key_value_heads=8, intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072,
                rms_norm_eps=1e-5, rope_theta=500000.0)  # fmt: skip
CARD = 24 * 10**9  # a 24 GB card's free memory


def test_an_8b_llama_in_bfloat16_fits_a_24_gb_card_and_in_float32_streams(monkeypatch):
    monkeypatch.delenv(LAYER_BUDGET_ENV, raising=False)
    low = residency_from_config(LLAMA_8B, "bfloat16", free=CARD)
    assert low.resident == 32 and low.per_pass == 0
    assert low.text == "weights resident in bfloat16, 14.0 GB"  # 32 × 436 MB of matrices, norms float32
    full = residency_from_config(LLAMA_8B, "float32", free=CARD)
    assert full.per_pass == 32 - full.resident > 0
    assert full.text.startswith(f"{full.per_pass} of 32 layers read from disk per token ({full.resident} resident, ")
    assert residency_from_config(LLAMA_8B, "float16", free=CARD).per_pass == 0
    # the budget injected through the environment, as on a shared machine
    monkeypatch.setenv(LAYER_BUDGET_ENV, str(layer_budget("cpu", free=CARD)))
    assert residency_from_config(LLAMA_8B, "bfloat16").per_pass == 0
    assert residency_from_config(LLAMA_8B, "float32").per_pass == full.per_pass


def test_an_unknown_dtype_is_one_line():
    with pytest.raises(InputError, match="dtype"):
        residency_from_config(LLAMA_8B, "float8")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    build(transformers, folder, "llama-gqa")
    return folder


def test_generate_says_its_dtype(folder, tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--model", str(folder), "--prompt", PROMPT, "--max-new-tokens", "3",
                 "--out", str(out), "--dtype", "bfloat16"]) == 0  # fmt: skip
    assert "weights resident in bfloat16" in capsys.readouterr().out
    assert main(["generate", "--model", str(folder), "--prompt", PROMPT, "--out", str(tmp_path / "x"),
                 "--dtype", "float64"]) == 2  # fmt: skip
    assert "error: argument --dtype: invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_export_all_layers_in_bfloat16_and_the_api(folder, tmp_path, capsys):
    out = tmp_path / "all"
    assert main(["export", "--model", str(folder), "--sentence", PROMPT, "--all-layers", "--dtype", "bfloat16",
                 "--out", str(out)]) == 0  # fmt: skip
    capsys.readouterr()
    low = api.load(folder, device="cpu", dtype="bfloat16")
    assert low.dtype == "bfloat16" and low.weights.startswith("weights resident in bfloat16")
    exact = api.load(folder, device="cpu")
    assert exact.dtype == "float32" and exact.weights.startswith("weights resident, ")
    a, b = low.trace(PROMPT, layer=2), exact.trace(PROMPT, layer=2)
    assert a.spec.dtype == "bfloat16" and a.stage("weights").dtype == np.float32
    assert 0 < np.abs(a.stage("weights") - b.stage("weights")).max() < 5e-2  # the layers below in bf16
    np.testing.assert_allclose(low.trace(PROMPT, layer=0).stage("q"), exact.trace(PROMPT, layer=0).stage("q"),
                               atol=2e-2)  # fmt: skip
    written = list(out.rglob("*.npy"))
    assert written
    with pytest.raises(InputError, match="dtype"):
        api.load(folder, device="cpu", dtype="int8")


def test_dtype_without_a_model_is_refused(tmp_path, capsys):
    assert main(["export", "--sentence", "a b c", "--dtype", "bfloat16", "--out", str(tmp_path / "t")]) == 2
    assert "--dtype applies only with --model" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("layer", [0, 2])
def test_the_traced_layer_of_a_float32_checkpoint_is_its_float32_weights_whatever_the_dtype(layer):
    """With --dtype bfloat16 the traced layer computed from the checkpoint's float32 values, not from the
    held bfloat16 ones cast up (MiniLM layer 0's queries were 8.5e-3 off, its weights 2.2e-3): layer 0's
    stages equal float32's; above it only the input differs (the layers below ran in bfloat16)."""
    sentence = "The cat sat on the mat."
    full, low = api.load("minilm").trace(sentence, layer=layer), api.load("minilm", dtype="bfloat16").trace(
        sentence, layer=layer)
    if layer == 0:
        for stage in ("input", "q", "k", "v", "scores", "weights", "output"):
            np.testing.assert_allclose(low.stage(stage), full.stage(stage), rtol=0, atol=1e-6, err_msg=stage)
    else:  # the layers below ran in bfloat16; the traced layer's own step is transformers' float32 query
        import torch

        from models.pretrained.registry import resolve_model

        assert np.abs(low.stage("input") - full.stage("input")).max() > 1e-4
        bert = transformers.AutoModel.from_pretrained(resolve_model("minilm"))
        query = bert.encoder.layer[layer].attention.self.query
        with torch.no_grad():
            q = query(torch.from_numpy(low.stage("input"))).numpy()  # (n, heads · d_k), float32
        heads, n, d_k = low.stage("q").shape
        np.testing.assert_allclose(low.stage("q"), q.reshape(n, heads, d_k).transpose(1, 0, 2), rtol=0, atol=1e-5)
