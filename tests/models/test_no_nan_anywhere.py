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


@pytest.fixture(scope="module")
def minus_inf_head(tmp_path_factory) -> Path:
    """A random BERT (the zoo's) whose layer 1 head 0 has q = 1e30·u and k = −1e30·u for every token
    (weights 0, biases ±1e30): every score of that head overflows to −∞, none to NaN, so its masked
    scores look like a row whose every key is hidden (issue 50, item 4)."""
    import sys

    from safetensors.torch import load_file

    sys.path.insert(0, str(Path(__file__).parent))
    import zoo

    folder = tmp_path_factory.mktemp("bert-inf") / "bert"
    folder.mkdir()
    zoo.build(folder, "bert")
    tensors = load_file(str(folder / "model.safetensors"))
    d_head = 32 // 4  # the zoo's BERT: hidden 32, 4 heads
    for name, sign in (("query", 1.0), ("key", -1.0)):
        tensors[f"encoder.layer.1.attention.self.{name}.weight"][:d_head] = 0.0
        tensors[f"encoder.layer.1.attention.self.{name}.bias"][:d_head] = sign * 1e30
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def test_scores_overflowing_to_minus_infinity_are_refused_not_read_as_hidden_keys(capsys, minus_inf_head):
    """Before: ``explain --stage weights`` of such a head exited 0 with "every key of row 2 is hidden
    … = 0" (and the API's explain the same), and ``why --row`` named a false cause ("sees no key"),
    while export refused; every read of the head now goes through the one gate."""
    from models import api
    from models.cli.why import why_main

    common = ["--model", str(minus_inf_head), "--layer", "1", "--sentence", SENTENCE]
    for stage in ("weights", "masked", "scaled"):
        line = _line(capsys, explain_main, [*common, "--stage", stage, "--cell", "0,2,1"])
        assert "of layer 1 overflows float32" in line and "-inf" in line and "queries and keys" in line, line
    assert "of layer 1 overflows float32" in _line(capsys, why_main, [*common, "--cell", "0,2,1", "--row"])
    trace = api.load(minus_inf_head, device="cpu").trace(SENTENCE, 1)
    with pytest.raises(InputError, match="of layer 1 overflows float32"):
        trace.explain("weights", (0, 2, 1))
    assert trace.explain("weights", (1, 2, 1))["value"] >= 0  # the other heads are finite: still explained
