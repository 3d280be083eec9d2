"""Hostile inputs (issue 12): never NaN, one error line instead of a traceback, only the weights a
score function uses, memory refused before allocating. Hostile model folders are built here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from test_pretrained_loader import gpt2_tensors, write_tiny_gpt2
from tokenizers import Tokenizer, models, pre_tokenizers

import models.engine.pipeline as pipeline
import models.memory as memory
from models.cli.export import export_main
from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine import attention as att
from models.engine.pipeline import run
from models.engine.weights import random_weights
from models.files.export import read_trace_files
from models.pretrained import load_model, resolve_model

transformers = pytest.importorskip("transformers")


def _refused(capsys, argv, message, out=None):
    """Exit 2, exactly one ``error:`` line containing ``message``, nothing written."""
    rc = export_main([*argv, "--out", str(out)])
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert rc == 2, captured.err
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert message in lines[0], lines[0]
    assert not Path(out).exists()
    return lines[0]


# --- never NaN: the softmax is exact for any positive temperature ---------------------------------


@pytest.mark.parametrize("temperature", [1e-45, 1e-300, 1e-30, 1.0, 1e30, 1e38])
def test_softmax_is_exact_for_any_positive_temperature(temperature):
    scores = torch.tensor([[[1.0, 3.0, 3.0, -2.0], [-3e38, 3e38, 0.0, float("-inf")]]])
    a = att.softmax(scores, temperature)
    assert torch.isfinite(a).all()
    torch.testing.assert_close(a.sum(-1), torch.ones(1, 2))
    exact = torch.softmax(scores.double() / temperature, -1) if temperature >= 1e-30 else None
    if temperature < 1:  # one-hot on the maximum (ties share it)
        torch.testing.assert_close(a[0, 0], torch.tensor([0.0, 0.5, 0.5, 0.0]))
        torch.testing.assert_close(a[0, 1], torch.tensor([0.0, 1.0, 0.0, 0.0]))
    if exact is not None and temperature >= 1:
        torch.testing.assert_close(a[0, 0].double(), exact[0, 0], atol=1e-6, rtol=1e-6)
    masked = att.softmax(torch.full((1, 1, 3), float("-inf")), temperature)
    assert torch.equal(masked, torch.zeros(1, 1, 3))  # all-masked rows stay 0


def test_cli_tiny_temperature_gives_one_hot_weights_not_nan(tmp_path, capsys):
    # Regression: --temperature 1e-45 was accepted and wrote NaN weights.
    out = tmp_path / "run"
    assert export_main(["--sentence", "the cat sat on the mat", "--temperature", "1e-45",
                        "--out", str(out)]) == 0  # fmt: skip
    _, arrays = read_trace_files(out)
    w = arrays["weights"]
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w.sum(-1), 1.0)
    top = arrays["scaled"] == arrays["scaled"].max(-1, keepdims=True)
    np.testing.assert_allclose(w, top / top.sum(-1, keepdims=True))


# --- never NaN: huge inputs are refused, naming the value ----------------------------------------


def test_huge_float32_embeddings_are_refused_not_written_as_nan(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.full((3, 16), 1e38, np.float32))
    line = _refused(capsys, ["--embeddings", str(tmp_path / "x.npy")], "overflows float32", tmp_path / "run")
    assert "largest |input| 1e+38" in line


def test_float64_embeddings_beyond_float32_are_refused_before_the_cast(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.full((3, 16), 1e300))
    _refused(capsys, ["--embeddings", str(tmp_path / "x.npy")], "holds 1e+300 at [0, 0], beyond float32",
             tmp_path / "run")  # fmt: skip


@pytest.mark.parametrize("value,message", [(1e30, "overflows float32"), (1e39, "holds 1e+39")])
def test_huge_weights_in_an_npz_are_refused(tmp_path, capsys, value, message):
    w = np.full((2, 16, 8), value)
    np.savez(tmp_path / "w.npz", W_q=w, W_k=w, W_v=w)
    _refused(capsys, ["--sentence", "a b", "--weights", str(tmp_path / "w.npz")], message, tmp_path / "run")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_checkpoint_with_nan_or_inf_is_refused_naming_the_tensor(tmp_path, bad):
    folder = write_tiny_gpt2(tmp_path / "model")
    tensors = gpt2_tensors()
    tensors["h.1.attn.c_attn.weight"][2, 5] = bad
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(InputError, match=rf"'h\.1\.attn\.c_attn\.weight' of the checkpoint holds {bad} at \[2, 5\]"):
        load_model(folder, device="cpu")


def test_a_float64_checkpoint_value_beyond_float32_is_refused(tmp_path):
    folder = write_tiny_gpt2(tmp_path / "model")
    tensors = {k: v.double() for k, v in gpt2_tensors().items()}
    tensors["wpe.weight"][0, 0] = 1e300
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(InputError, match="'wpe.weight' of the checkpoint holds inf"):
        load_model(folder, device="cpu")


# --- hostile config.json files ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory) -> Path:
    """A small random LLaMA saved with transformers, with a word-level tokenizer.json."""
    words = ["the", "cat", "sat", "on", "mat", "a", "dog"]
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=len(words) + 1, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                   max_position_embeddings=16)  # fmt: skip
    folder = tmp_path_factory.mktemp("llama")
    transformers.LlamaModel(cfg).save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def _altered(source: Path, tmp_path: Path, change) -> Path:
    """A copy of a model folder (weights linked, not copied) whose config.json ``change`` edits."""
    folder = tmp_path / f"altered-{source.name}"
    folder.mkdir()
    for path in source.iterdir():
        if path.is_file() and path.name != "config.json":
            (folder / path.name).symlink_to(path.resolve())
    cfg = json.loads((source / "config.json").read_text(encoding="utf-8"))
    text = change(cfg)
    (folder / "config.json").write_text(text if isinstance(text, str) else json.dumps(cfg), encoding="utf-8")
    return folder


def _set(**values):
    return lambda cfg: cfg.update(values)


MINILM_CASES = {
    "eps-nan": (_set(layer_norm_eps=float("nan")), "layer_norm_eps must be a positive number, got nan"),
    "eps-text": (_set(layer_norm_eps="tiny"), "layer_norm_eps must be a number, got 'tiny'"),
    "eps-negative": (_set(layer_norm_eps=-1), "layer_norm_eps must be a positive number, got -1.0"),
    "act-list": (_set(hidden_act=["gelu"]), "hidden_act must be a string, got ['gelu']"),
    "deep-json": (lambda cfg: "[" * 100000 + "]" * 100000, "JSON nested too deeply"),
}
LLAMA_CASES = {
    "rms-eps-negative": (_set(rms_norm_eps=-1), "rms_norm_eps must be a positive number, got -1.0"),
    "rope-theta-zero": (_set(rope_theta=0, rope_parameters=None), "rope_theta must be a positive number, got 0.0"),
    "rope-params-list": (_set(rope_parameters=[1, 2]), "rope_parameters must be a JSON object, got [1, 2]"),
    "rope-linear-no-factor": (_set(rope_parameters={"rope_type": "linear", "rope_theta": 1e4}),
                              "rope type 'linear' needs 'factor'"),  # fmt: skip
    "rope-llama3-bad": (_set(rope_parameters={"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
                                              "high_freq_factor": 1}), "must exceed low_freq_factor"),  # fmt: skip
    "act-list": (_set(hidden_act=["silu"]), "hidden_act must be a string"),
}


@pytest.mark.parametrize("case", list(MINILM_CASES))
def test_hostile_minilm_configs_are_one_line_errors(tmp_path, capsys, case):
    change, message = MINILM_CASES[case]
    folder = _altered(resolve_model("minilm"), tmp_path, change)
    _refused(capsys, ["--model", str(folder), "--sentence", "a cat"], message, tmp_path / "run")


@pytest.mark.parametrize("case", list(LLAMA_CASES))
def test_hostile_llama_configs_are_one_line_errors(tmp_path, capsys, llama_folder, case):
    change, message = LLAMA_CASES[case]
    folder = _altered(llama_folder, tmp_path, change)
    _refused(capsys, ["--model", str(folder), "--sentence", "the cat sat"], message, tmp_path / "run")


def test_the_llama_folder_itself_loads(llama_folder):
    assert np.isfinite(load_model(llama_folder, device="cpu").trace("the cat sat", 1)["weights"].array).all()


def test_scale_attn_weights_given_as_a_string_is_refused(tmp_path, capsys):
    # Regression: "false" was read with bool() as True, so the scores were scaled anyway.
    folder = write_tiny_gpt2(tmp_path / "model", scale_attn_weights="false")
    _refused(capsys, ["--model", str(folder), "--sentence", "the cat"],
             "scale_attn_weights must be true or false, got 'false'", tmp_path / "run")  # fmt: skip
    unscaled = load_model(write_tiny_gpt2(tmp_path / "real", scale_attn_weights=False), device="cpu")
    trace = unscaled.trace("the cat sat", 0)
    np.testing.assert_array_equal(trace["scaled"].array, trace["scores"].array)


# --- one line, not a traceback: the command line ---------------------------------------------------


@pytest.mark.parametrize("seed", ["18446744073709551615", "9223372036854775808", "-1"])
def test_seeds_outside_63_bits_are_refused(tmp_path, capsys, seed):
    _refused(capsys, ["--sentence", "a b", f"--seed={seed}"], "seed must be an integer from 0 to 2**63-1",
             tmp_path / "run")  # fmt: skip


def test_the_largest_seed_works(tmp_path):
    assert export_main(["--sentence", "a b", "--seed", str(2**63 - 1), "--out", str(tmp_path / "run")]) == 0


def test_invalid_utf8_in_an_argument_is_refused(tmp_path, capsys):
    sentence = b"caf\xe9 au lait".decode("utf-8", "surrogateescape")  # how Python passes such argv
    _refused(capsys, ["--sentence", sentence], "--sentence is not valid UTF-8 text", tmp_path / "run")
    _refused(capsys, ["--sentence", "a b", "--cross-sentence", sentence], "--cross-sentence is not valid",
             tmp_path / "run")  # fmt: skip


def test_an_output_folder_name_that_is_not_utf8_still_works(tmp_path, capsys):
    out = tmp_path / b"r\xffn".decode("utf-8", "surrogateescape")
    assert export_main(["--sentence", "a b", "--out", str(out)]) == 0
    assert "\\udcff" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra,named",
    [(["--heads", "4"], "--heads"), (["--temperature", "2", "--weights", "w.npz"], "--temperature, --weights"),
     (["--score", "additive", "--pe", "sinusoidal", "--d-model", "8"], "--d-model, --score, --pe"),
     (["--seed", "3"], "--seed")],
)  # fmt: skip
def test_options_a_model_ignores_are_refused_by_name(tmp_path, capsys, extra, named):
    line = _refused(capsys, ["--model", "minilm", "--sentence", "a b", *extra], "not apply with --model",
                    tmp_path / "run")  # fmt: skip
    assert named in line


def test_an_empty_model_name_is_refused(tmp_path, capsys):
    # Regression: --model "" silently ran the toy engine.
    _refused(capsys, ["--model", "", "--sentence", "a b"], "no model given", tmp_path / "run")
    _refused(capsys, ["--model", "  ", "--sentence", "a b"], "no model given", tmp_path / "run")


def test_layer_without_a_model_is_refused(tmp_path, capsys):
    _refused(capsys, ["--sentence", "a b", "--layer", "2"], "--layer applies only with --model", tmp_path / "run")


def test_pad_positions_a_mask_ignores_are_named_and_duplicates_merged(tmp_path, capsys):
    out = tmp_path / "run"
    assert export_main(["--sentence", "a b c", "--mask", "causal", "--pad-positions", "2,0,2",
                        "--out", str(out)]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert err == "note: --pad-positions 0,2 ignored: mask 'causal' does not use them (use --mask padding)\n"
    assert export_main(["--sentence", "a b c", "--mask", "padding", "--pad-positions", "2,2,1",
                        "--out", str(tmp_path / "pad")]) == 0  # fmt: skip
    man, arrays = read_trace_files(tmp_path / "pad")
    assert man["config"]["pad_positions"] == [1, 2]
    assert np.all(arrays["weights"][:, :, 1:] == 0) and capsys.readouterr().err == ""


def test_an_out_of_memory_runtime_error_is_one_line(tmp_path, capsys, monkeypatch):
    def oom(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate "
                           "memory: you tried to allocate 17179869184 bytes. Error code 12")  # fmt: skip

    monkeypatch.setattr(pipeline, "seeded_weights", oom)  # the run's draw of its weights
    _refused(capsys, ["--sentence", "a b"], "not enough memory for this input", tmp_path / "run")
    monkeypatch.setattr(pipeline, "seeded_weights", lambda cfg: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # an engine bug is not dressed up as a user error
        export_main(["--sentence", "a b", "--out", str(tmp_path / "run")])


# --- memory: only the weights a score uses, refusal before allocating ------------------------------


def _old_random_weights(cfg):
    """The generator as it was before issue 12: every score parameter, always."""
    h, d, dk, dv, do = cfg.heads, cfg.d_model, cfg.head_dim_k, cfg.head_dim_v, cfg.out_dim
    gen = torch.Generator().manual_seed(cfg.seed + 1)

    def u(shape, fan_in):
        return ((torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1) * (1.0 / np.sqrt(fan_in))).numpy()

    w = {"W_q": u((h, d, dk), d), "W_k": u((h, d, dk), d), "W_v": u((h, d, dv), d), "W_o": u((h * dv, do), h * dv)}
    if cfg.bias:
        w |= {"b_q": u((h, dk), d), "b_k": u((h, dk), d), "b_v": u((h, dv), d), "b_o": u((do,), h * dv)}
    extra = {"W_1": u((h, dk, dk), dk), "W_2": u((h, dk, dk), dk), "w": u((h, dk), dk), "W_g": u((h, dk, dk), dk)}
    return w, extra


@pytest.mark.parametrize("score,used", [("dot", ()), ("scaled", ()), ("additive", ("W_1", "W_2", "w")),
                                        ("general", ("W_g",))])  # fmt: skip
@pytest.mark.parametrize("bias", [False, True])
def test_only_the_score_functions_weights_are_made_with_unchanged_values(score, used, bias):
    cfg = AttentionConfig(heads=3, d_model=12, d_k=5, score=score, bias=bias, seed=7)
    new = random_weights(cfg)
    old, old_extra = _old_random_weights(cfg)
    assert sorted(new.extra) == sorted(used)
    for name in used:
        np.testing.assert_array_equal(new.extra[name], old_extra[name])
    for name, value in old.items():
        np.testing.assert_array_equal(getattr(new, name), value)


def test_a_huge_d_k_with_scaled_scores_costs_only_its_projections(tmp_path):
    # Regression: --d-k 40000 drew W_1, W_2 and W_g (~19 GB) that scaled scores never read.
    cfg = AttentionConfig(heads=2, d_model=16, d_k=40000)
    assert memory.estimate_toy_peak(cfg, 2, 2, False) < 64 << 20 + memory.MARGIN
    trace = run(AttentionRequest(config=cfg, sentence="a b"))
    assert trace["q"].shape == (2, 2, 40000)


def test_a_request_too_big_for_the_available_memory_is_refused_before_allocating(monkeypatch):
    cfg = AttentionConfig(heads=2, d_model=16)
    needed = memory.estimate_toy_peak(cfg, 3, 3, False)
    monkeypatch.setattr(pipeline, "seeded_weights", lambda cfg: pytest.fail("allocated before checking"))
    monkeypatch.setattr(memory, "available_bytes", lambda: needed - 1)
    with pytest.raises(InputError, match=r"3×3 tokens with 2 heads needs about .* of memory but only"):
        run(AttentionRequest(config=cfg, sentence="a b c"))


def test_loading_and_tracing_a_model_are_checked_against_the_available_memory(monkeypatch, tmp_path):
    folder = write_tiny_gpt2(tmp_path / "model")
    files = [folder / "model.safetensors"]
    stored = sum(t.nbytes for t in gpt2_tensors().values())
    assert memory.estimate_pretrained_load(files) >= stored  # float32 on disk: no extra copy
    half = tmp_path / "half"
    shutil.copytree(folder, half)
    save_file({k: v.half() for k, v in gpt2_tensors().items()}, str(half / "model.safetensors"))
    extra = memory.estimate_pretrained_load([half / "model.safetensors"]) - memory.MARGIN
    assert extra >= stored // 2 + stored  # the float16 file plus its float32 copy: ~3× the file
    model = load_model(folder, device="cpu")
    monkeypatch.setattr(memory, "available_bytes", lambda: 1000)
    with pytest.raises(InputError, match="loading model needs about"):
        load_model(folder, device="cpu")
    with pytest.raises(InputError, match="tracing 3 tokens of model needs about"):
        model.trace("the cat sat", 1)
