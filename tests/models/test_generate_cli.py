"""``main.py generate``: the files, their shapes and agreement with the run, ``--json``, ``--force``
and the one-line refusals (nothing written)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from generate_refs import PROMPT, build

from main import main
from models.config import InputError
from models.generate import GenerateSettings, generate
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    build(transformers, folder, "llama-gqa")
    return folder


def test_writes_the_generation(folder, tmp_path, capsys):
    out = tmp_path / "gen"
    code = main(["generate", "--model", str(folder), "--prompt", PROMPT, "--max-new-tokens", "6",
                 "--out", str(out), "--json", "--top", "4"])  # fmt: skip
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    tokens = json.loads((out / "tokens.json").read_text())
    man = json.loads((out / "manifest.json").read_text())
    n = len(tokens["ids"])
    assert printed["all_ids"] == tokens["ids"] and len(printed["ids"]) == 6 == n - tokens["prompt_length"]
    assert man["n"] == n and man["tool"] == "attention-explorer" and man["settings"]["temperature"] == 0
    assert len(tokens["steps"]) == 7 and all(len(s["top"]) == 4 for s in tokens["steps"])
    assert [s["chosen"] for s in tokens["steps"]] == tokens["ids"][tokens["prompt_length"] :] + [None]
    attention = np.load(out / "attention.npy")
    lens_ids, lens_prob = np.load(out / "lens_ids.npy"), np.load(out / "lens_prob.npy")
    assert attention.shape == (3, 4, n, n) and lens_ids.shape == lens_prob.shape == (3, n)
    assert lens_ids.dtype == np.int64 and lens_prob.dtype == np.float32
    np.testing.assert_allclose(attention.sum(-1), 1, atol=1e-5)
    assert np.all(np.triu(attention, 1) == 0)
    gen = generate(load_model(folder, device="cpu"), PROMPT, GenerateSettings(max_new_tokens=6))
    np.testing.assert_array_equal(attention, gen.attention())
    np.testing.assert_array_equal(lens_ids, gen.lens_ids)
    # --force replaces a previous generation; without it the folder is refused
    assert main(["generate", "--model", str(folder), "--prompt", "a dog", "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["generate", "--model", str(folder), "--prompt", "a dog", "--max-new-tokens", "2",
                 "--out", str(out), "--force"]) == 0  # fmt: skip
    assert json.loads((out / "manifest.json").read_text())["prompt"] == "a dog"


def test_sampling_options_repeat_with_a_seed(folder, tmp_path, capsys):
    runs = []
    for i in range(2):
        args = ["generate", "--model", str(folder), "--prompt", PROMPT, "--temperature", "1.3",
                "--top-k", "40", "--top-p", "0.9", "--seed", "3", "--out", str(tmp_path / f"s{i}"),
                "--json"]  # fmt: skip
        assert main(args) == 0
        runs.append(json.loads(capsys.readouterr().out)["ids"])
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--top-k", "5"], "apply only when sampling"),
        (["--temperature", "-1"], "temperature must be"),
        (["--temperature", "nan"], "temperature must be"),
        (["--temperature", "1", "--top-p", "1.5"], "top-p must be"),
        (["--temperature", "1", "--top-k", "0"], "top-k must be"),
        (["--max-new-tokens", "0"], "--max-new-tokens must be from 1 to 4096, got 0"),
        (["--max-new-tokens", "-5"], "--max-new-tokens must be from 1 to 4096, got -5"),
        (["--max-new-tokens", "100000"], "--max-new-tokens must be from 1 to 4096, got 100000"),
        (["--seed", "-2", "--temperature", "1"], "seed must be"),
        (["--top", "0"], "--top must be from 1 to 50"),
        (["--step", "first"], "has no training steps"),  # --step as wherever --model is taken (issue 35)
    ],
)
def test_bad_options_are_one_line_and_write_nothing(folder, tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    assert main(["generate", "--model", str(folder), "--prompt", PROMPT, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_refusals_of_model_and_prompt(folder, tmp_path, capsys):
    out = tmp_path / "never"
    base = tmp_path / "base"  # a decoder saved without its head (and untied): cannot predict
    config = transformers.LlamaConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, max_position_embeddings=16)  # fmt: skip
    transformers.LlamaModel(config).save_pretrained(base)
    (base / "tokenizer.json").write_text((folder / "tokenizer.json").read_text())
    capsys.readouterr()
    cases = [
        (["--model", str(base), "--prompt", PROMPT], "no language-model head"),
        (["--model", str(folder), "--prompt", "   "], "empty"),
        (["--model", str(tmp_path / "nowhere"), "--prompt", PROMPT], "error: "),
    ]
    for args, message in cases:
        assert main(["generate", *args, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
        assert not out.exists()


def test_max_positions_bound_the_generation(folder):
    model = load_model(folder, device="cpu")
    gen = generate(model, PROMPT, GenerateSettings(max_new_tokens=100))
    assert gen.n == model.max_positions and gen.stopped == "max positions"
    assert any("fit in" in n for n in gen.notices)


def test_memory_is_checked_before_generating(folder, tmp_path, capsys, monkeypatch):
    from models import memory

    model = load_model(folder, device="cpu")
    generate(model, PROMPT, GenerateSettings(max_new_tokens=1))  # the head is read (and checked) once
    free = 1 << 20
    monkeypatch.setattr(memory, "available_bytes", lambda: free)
    with pytest.raises(InputError, match="generating 20 tokens after .* needs about"):
        generate(model, PROMPT, GenerateSettings(max_new_tokens=20))
    out = tmp_path / "never"
    assert main(["generate", "--model", str(folder), "--prompt", PROMPT, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "of memory" in err and not out.exists()
    free = 1 << 40
    assert generate(model, PROMPT, GenerateSettings(max_new_tokens=2)).generated == 2
