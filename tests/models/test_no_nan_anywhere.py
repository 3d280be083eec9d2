"""No NaN on any path (issue 19): what the single-layer export refuses, ``--all-layers``, explain,
the survey's weights and every read of a trace refuse too, naming the stage, the layer and the
cause (a tiny rope base is named as such, not blamed on "inputs too large")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import save_file
from test_pretrained_loader import D, gpt2_tensors, write_tiny_gpt2

from models.cli.explain import explain_main
from models.cli.export import export_main
from models.config import InputError
from models.pretrained import load_model

SENTENCE = "the cat sat"
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def big_qk(tmp_path_factory) -> Path:
    """A GPT-2 whose layer 1 query and key projections are scaled by 1e20: finite weights and
    finite Q, K, but dot products beyond float32."""
    folder = write_tiny_gpt2(tmp_path_factory.mktemp("bigqk") / "big-qk")
    tensors = gpt2_tensors()
    tensors["h.1.attn.c_attn.weight"][:, : 2 * D] *= 1e20
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


@pytest.fixture(scope="module")
def tiny_rope(tmp_path_factory) -> Path:
    """A small random LLaMA whose rope base is 1e-300 (its rotary frequencies are infinite)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["the", "cat", "sat"]
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=len(words) + 1, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                   max_position_embeddings=16)  # fmt: skip
    folder = tmp_path_factory.mktemp("rope") / "tiny-rope"
    transformers.LlamaModel(cfg).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("rope_parameters", None)
    config["rope_theta"] = 1e-300
    (folder / "config.json").write_text(json.dumps(config))
    tok = Tokenizer(models.WordLevel({"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def _line(capsys, run, argv) -> str:
    rc = run(argv)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), captured
    assert "nan" not in captured.out.lower()
    return lines[0]


@pytest.mark.parametrize("mode", [["--layer", "1"], ["--all-layers"]])
def test_export_refuses_overflowing_scores_naming_stage_and_layer(tmp_path, capsys, big_qk, mode):
    out = tmp_path / "out"
    line = _line(capsys, export_main, ["--model", str(big_qk), "--sentence", SENTENCE, *mode, "--out", str(out)])
    assert "overflows float32" in line and "of layer 1" in line and "queries and keys" in line
    assert not out.exists() and not any(".partial-" in p.name for p in tmp_path.iterdir())


def test_explain_refuses_what_export_refuses(capsys, big_qk):
    argv = ["--model", str(big_qk), "--layer", "1", "--sentence", SENTENCE, "--stage", "weights", "--cell", "0,2,1"]
    line = _line(capsys, explain_main, [*argv, "--json"])
    assert "of layer 1" in line and "overflows float32" in line


def test_every_read_of_the_trace_and_the_survey_refuse(big_qk):
    model = load_model(big_qk, device="cpu")
    trace = model.trace(SENTENCE, 1)
    with pytest.raises(InputError, match="stage 'weights' of layer 1 overflows"):
        trace["weights"].store.block("weights", 0, 0)  # what the window paints and compares read
    with pytest.raises(InputError, match="stage 'scores' of layer 1 overflows"):
        model.layer_weights(SENTENCE)  # the survey's and --all-layers' pass
    assert np.isfinite(model.trace(SENTENCE, 0)["weights"].store.full("weights")).all()  # layer 0 is fine


@pytest.mark.parametrize("mode", [["--layer", "0"], ["--all-layers"]])
def test_a_tiny_rope_base_is_named_not_blamed_on_the_inputs(tmp_path, capsys, tiny_rope, mode):
    line = _line(capsys, export_main, ["--model", str(tiny_rope), "--sentence", SENTENCE, *mode,
                                       "--out", str(tmp_path / "out")])  # fmt: skip
    assert "rope base (rope_theta) 1e-300 is too small" in line and "inputs" not in line


@pytest.mark.parametrize("masked", [False, True])
def test_the_quick_finite_check_agrees_with_its_definition(masked):
    """all_finite (one min/max reduction, what the survey runs on every n×n stage) says the same as
    isfinite on every cell, −∞ allowed only in the masked stage, for NaN, ±∞ and float32's extremes
    at any position, and for float16 and bfloat16."""
    import torch

    from models.engine.finite import all_finite

    rng = np.random.default_rng(0)
    specials = [float("nan"), float("inf"), -float("inf"), 3.4e38, -3.4e38, 0.0]
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for trial in range(60):
            t = torch.from_numpy(rng.normal(size=(3, 7, 7)).astype(np.float32)).to(dtype)
            for _ in range(trial % 4):  # 0 to 3 special values at random cells
                t.view(-1)[int(rng.integers(t.numel()))] = specials[int(rng.integers(len(specials)))]
            if trial % 5 == 0:  # a whole hidden row
                t[0, 2] = -float("inf")
            bad = ~torch.isfinite(t)
            if masked:
                bad &= t != -float("inf")
            assert all_finite(t, masked=masked) == (not bool(bad.any())), (dtype, trial, t)
    assert all_finite(torch.empty(0, 4)) and all_finite(torch.full((2, 2), -float("inf")), masked=True)
