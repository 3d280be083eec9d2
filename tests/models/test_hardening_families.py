"""The hardening of config.json values, checkpoint values and memory for every family.

Regressions after the families were restructured: eps, rope, soft-capping and bool values of
qwen, gemma, phi3, gpt_neox, RoBERTa and DistilBERT were read with float()/bool() (a NaN eps
traced NaN, "false" read as True, a list for an activation or a layer type a TypeError); a NaN in
a tensor of the new families or in an embedding kept as stored (bf16) went unchecked; a big
checkpoint's load and its layers read at trace time were not checked against the memory.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import models.memory as memory
from models.config import InputError
from models.pretrained import load_model, loader

transformers = pytest.importorskip("transformers")
from tests.models.test_pretrained_families import build  # noqa: E402

NAN, INF = float("nan"), float("inf")
SENTENCE = "the cat sat on the mat"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One small random model per family, built once: ``built(name)`` is its folder."""
    folders = {}

    def get(name: str):
        if name not in folders:
            folders[name] = tmp_path_factory.mktemp(name)
            build(folders[name], name)
        return folders[name]

    return get


def altered(src, dst, change=None, **values):
    """A copy of ``src`` (files linked) whose config.json has ``values`` set."""
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "config.json":
            (dst / f.name).symlink_to(f)
    cfg = {**json.loads((src / "config.json").read_text()), **values}
    if change is not None:
        change(cfg)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _rope(**values):
    return lambda cfg: cfg["rope_parameters"].update(values)


CASES = {
    "qwen2-eps-nan": ("qwen2-bias-gqa-window", dict(rms_norm_eps=NAN), None,
                      "rms_norm_eps must be a positive number, got nan"),
    "qwen2-window-flag-text": ("qwen2-bias-gqa-window", dict(use_sliding_window="false"), None,
                               "use_sliding_window must be true or false, got 'false'"),
    "qwen2-window-layers-text": ("qwen2-bias-gqa-window", dict(max_window_layers="1", layer_types=None),
                                 None,
                                 "max_window_layers must be an integer ≥ 0, got '1'"),
    "qwen3-act-list": ("qwen3-qknorm", dict(hidden_act=["silu"]), None,
                       "hidden_act must be a string, got ['silu']"),
    "qwen3-layer-type-list": ("qwen3-qknorm", dict(layer_types=[["full_attention"]] * 3), None,
                              "unsupported layer type ['full_attention']"),
    "mistral-window-negative": ("mistral-window", dict(sliding_window=-4), None,
                                "sliding_window must be a positive integer, got -4"),
    "gemma-act-list": ("gemma-mqa", dict(hidden_activation=["gelu"]), None,
                       "hidden_activation must be a string, got ['gelu']"),
    "gemma2-scalar-zero": ("gemma2-softcap-window", dict(query_pre_attn_scalar=0), None,
                           "query_pre_attn_scalar must be a positive number, got 0.0"),
    "gemma2-softcap-text": ("gemma2-softcap-window", dict(attn_logit_softcapping="big"), None,
                            "attn_logit_softcapping must be a number, got 'big'"),
    "gemma2-softcap-inf": ("gemma2-softcap-window", dict(attn_logit_softcapping=INF), None,
                           "attn_logit_softcapping must be a positive number, got inf"),
    "gemma2-bidirectional-text": ("gemma2-softcap-window", dict(use_bidirectional_attention="no"),
                                  None, "use_bidirectional_attention must be true or false"),
    "phi3-partial-text": ("phi3-fused-partial-window", {}, _rope(partial_rotary_factor="half"),
                          "partial_rotary_factor must be a number, got 'half'"),
    "phi3-partial-too-big": ("phi3-fused-partial-window", {}, _rope(partial_rotary_factor=4),
                             "rotary features per head of 8"),
    "phi3-theta-zero": ("phi3-fused-partial-window", {}, _rope(rope_theta=0),
                        "rope_theta must be a positive number, got 0.0"),
    "phi3-scaling-list": ("phi3-fused-partial-window", dict(rope_scaling=[1]), None,
                          "rope_scaling must be a JSON object, got [1]"),
    "phi3-rope-type-list": ("phi3-fused-partial-window", {}, _rope(rope_type=["default"]),
                            "unsupported rope type ['default']"),
    "gpt_neox-eps-text": ("gpt_neox-parallel", dict(layer_norm_eps="x"), None,
                          "layer_norm_eps must be a number, got 'x'"),
    "gpt_neox-parallel-text": ("gpt_neox-parallel", dict(use_parallel_residual="true"), None,
                               "use_parallel_residual must be true or false, got 'true'"),
    "gpt_neox-rotary-pct-nan": ("gpt_neox-parallel", dict(rope_parameters=None, rotary_pct=NAN),
                                None, "rotary_pct must be a positive number, got nan"),
    "gpt_neox-rotary-base-zero": ("gpt_neox-parallel",
                                  dict(rope_parameters=None, rotary_emb_base=0), None,
                                  "rotary_emb_base must be a positive number, got 0.0"),
    "roberta-eps-negative": ("roberta", dict(layer_norm_eps=-1), None,
                             "layer_norm_eps must be a positive number, got -1.0"),
    "roberta-act-number": ("roberta", dict(hidden_act=3), None, "hidden_act must be a string, got 3"),
    "roberta-position-list": ("roberta", dict(position_embedding_type=["absolute"]), None,
                              "position_embedding_type must be a string"),
    "distilbert-act-list": ("distilbert", dict(activation=["gelu"]), None,
                            "activation must be a string, got ['gelu']"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_configs_of_every_family_are_one_line_errors(built, tmp_path, case):
    name, values, change, message = CASES[case]
    folder = altered(built(name), tmp_path / "m", change, **values)
    with pytest.raises(InputError) as info:
        load_model(folder, device="cpu")
    text = str(info.value)
    assert message in text and "\n" not in text


@pytest.mark.parametrize("name, key", [
    ("gemma2-softcap-window", "layers.1.self_attn.k_proj.weight"),
    ("gpt_neox-parallel", "layers.2.attention.query_key_value.weight"),
    ("distilbert", "transformer.layer.0.ffn.lin1.weight"),
])  # fmt: skip
def test_nan_in_a_tensor_of_any_family_is_refused_naming_it(built, tmp_path, name, key):
    folder = altered(built(name), tmp_path / "m")
    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    stored = next(k for k in tensors if k.endswith(key))
    tensors[stored][1, 3] = NAN
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(InputError, match=rf"tensor '{key}' of the checkpoint holds nan at \[1, 3\]"):
        load_model(folder, device="cpu")


@pytest.fixture
def lazy(monkeypatch):
    monkeypatch.setattr(loader, "PRELOAD_FILE_BYTES", 0)  # as if the checkpoint were big


def _bf16_copy(src, dst, poison: str | None = None):
    """``src`` saved in bfloat16 (``poison``: that tensor gets an inf)."""
    folder = altered(src, dst)
    tensors = {k: v.to(torch.bfloat16) for k, v in load_file(str(folder / "model.safetensors")).items()}
    if poison is not None:
        tensors[poison][2, 1] = INF
    (folder / "model.safetensors").unlink()
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def test_an_embedding_kept_as_stored_is_checked_too(built, tmp_path, lazy):
    # Regression: a big checkpoint keeps its embedding matrix in bf16 (Weights.stored), unchecked.
    folder = _bf16_copy(built("qwen3-qknorm"), tmp_path / "m", poison="embed_tokens.weight")
    with pytest.raises(InputError, match=r"'embed_tokens.weight' of the checkpoint holds inf at \[2, 1\]"):
        load_model(folder, device="cpu")


def test_a_big_checkpoint_is_checked_for_what_load_and_trace_read(built, tmp_path, lazy, monkeypatch):
    # Regression: the lazy path checked no memory at all, and sizing the trace read layer 0.
    folder = _bf16_copy(built("qwen3-qknorm"), tmp_path / "m")
    with monkeypatch.context() as m:
        m.setattr(memory, "available_bytes", lambda: 1000)
        with pytest.raises(InputError, match="loading m needs about"):
            load_model(folder, device="cpu")
    model = load_model(folder, device="cpu")
    store = model.arch.layers
    assert store.reads == 0  # nothing but the embeddings and the final norm read at load
    layer_bytes = sum(store.held_bytes(i) for i in range(3))
    assert layer_bytes == 2 * sum(store.stored_bytes(i) for i in range(3))  # bf16 -> float32
    n = len(model.tokenize(SENTENCE)[1])
    peak = memory.estimate_pretrained_peak(model.arch, n, 2)
    monkeypatch.setattr(memory, "available_bytes", lambda: peak + layer_bytes - 1)
    with pytest.raises(InputError, match=f"tracing {n} tokens of m needs about"):
        model.trace(SENTENCE, 2)
    assert store.reads == 0  # refused before reading a layer
    monkeypatch.setattr(memory, "available_bytes", lambda: peak + layer_bytes)
    model.trace(SENTENCE, 2)
    assert store.reads == 3
    monkeypatch.setattr(memory, "available_bytes", lambda: peak)  # the layers are in memory now
    model.trace(SENTENCE, 2)
