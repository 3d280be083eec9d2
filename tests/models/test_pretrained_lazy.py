"""Big checkpoints: layers read only when traced, sharded files opened only when needed,
progress in bytes, cancellation, bf16 kept as stored until used, a memory budget for layers.
Also the refusals of what cannot be reproduced exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from models.config import Cancelled, InputError
from models.pretrained import load_model, loader
from models.pretrained.layer_store import LayerStore

transformers = pytest.importorskip("transformers")
from tests.models.test_pretrained_families import build, make_tokenizer  # noqa: E402

SENTENCE = "the cat sat on the mat"
LAYERS = 3


@pytest.fixture(scope="module")
def llama_state(tmp_path_factory):
    """(folder of a single-file float32 llama, its state dict with 'model.' keys)."""
    torch.manual_seed(0)
    tok = make_tokenizer(encoder=False)
    config = transformers.LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        initializer_range=0.2,
    )
    model = transformers.LlamaForCausalLM(config)
    folder = tmp_path_factory.mktemp("llama")
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    return folder, state


def write_sharded(src, state, dst, dtype=torch.float32):
    """Shard 1: embeddings, norm, lm_head, layer 0; shard i+1: layer i."""
    dst.mkdir()
    for f in ("config.json", "tokenizer.json"):
        (dst / f).write_bytes((src / f).read_bytes())
    names = [f"model-{i + 1:05d}-of-{LAYERS:05d}.safetensors" for i in range(LAYERS)]
    weight_map = {}
    for key in state:
        layer = int(key.split(".")[2]) if key.startswith("model.layers.") else 0
        weight_map[key] = names[layer]
    for name in names:
        tensors = {k: state[k].to(dtype) for k, f in weight_map.items() if f == name}
        save_file(tensors, str(dst / name))
    (dst / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return dst, names


@pytest.fixture
def lazy(monkeypatch):
    monkeypatch.setattr(loader, "PRELOAD_FILE_BYTES", 0)  # as if the checkpoint were big


def test_layer_0_never_opens_later_shards(llama_state, tmp_path, lazy):
    src, state = llama_state
    folder, names = write_sharded(src, state, tmp_path / "sharded")
    for name in names[1:]:  # later shards unreadable: opening one would fail
        (folder / name).write_bytes(b"\x00" * 16)
    model = load_model(folder, device="cpu")
    trace = model.trace(SENTENCE, 0)
    opened = {p.name for p in model.arch.layers.weights.ckpt.opened}
    assert opened == {names[0]}
    reference = load_model(src, device="cpu").trace(SENTENCE, 0)
    np.testing.assert_array_equal(trace["weights"].array, reference["weights"].array)
    with pytest.raises(InputError, match="truncated or corrupt"):
        model.trace(SENTENCE, 1)


def test_sharded_lazy_matches_single_file(llama_state, tmp_path, lazy):
    src, state = llama_state
    folder, _ = write_sharded(src, state, tmp_path / "sharded")
    model = load_model(folder, device="cpu")
    assert not any(model.arch.layers.cached(i) for i in range(LAYERS))  # nothing read yet
    whole = load_model(src, device="cpu")
    for layer in range(LAYERS):
        a, b = model.trace(SENTENCE, layer), whole.trace(SENTENCE, layer)
        np.testing.assert_array_equal(a["output"].array, b["output"].array)


def test_progress_in_bytes_while_tracing(llama_state, tmp_path, lazy):
    src, state = llama_state
    folder, _ = write_sharded(src, state, tmp_path / "sharded")
    seen = []
    model = load_model(folder, device="cpu", progress=lambda f, m: seen.append((f, m)))
    seen.clear()
    model.trace(SENTENCE, 2)
    reading = [(f, m) for f, m in seen if m.startswith("Reading")]
    fractions = [f for f, _ in reading]
    assert len(reading) > LAYERS and fractions == sorted(fractions)
    assert reading[-1][1].endswith("MB") and " / " in reading[-1][1]
    layer_bytes = sum(t.nbytes for k, t in state.items() if k.startswith("model.layers."))
    assert reading[-1][1] == f"Reading {layer_bytes / 1e6:.1f} / {layer_bytes / 1e6:.1f} MB"
    assert seen[-1][0] == 1.0
    seen.clear()
    model.trace("a dog", 2)  # every layer in memory now: nothing read, nothing reported
    assert not seen


def test_cancel_while_reading_layers(llama_state, tmp_path, lazy):
    src, state = llama_state
    folder, _ = write_sharded(src, state, tmp_path / "sharded")

    def give_up(fraction, message):
        if message.startswith("Reading") and fraction > 0.5:
            raise Cancelled("stale")

    model = load_model(folder, device="cpu", progress=give_up)
    with pytest.raises(Cancelled):
        model.trace(SENTENCE, 2)
    model.progress = lambda f, m: None
    calls = []
    with pytest.raises(Cancelled):
        model.trace("a dog", 2, should_stop=lambda: calls.append(1) or len(calls) > 3)
    assert model.trace(SENTENCE, 2)["weights"].shape[0] == 4  # still usable afterwards


def test_bf16_kept_as_stored_and_converted_per_layer(llama_state, tmp_path, lazy):
    src, state = llama_state
    folder, _ = write_sharded(src, state, tmp_path / "bf16", dtype=torch.bfloat16)
    model = load_model(folder, device="cpu")
    assert model.arch.embed_tokens.dtype == torch.bfloat16  # rows converted when looked up
    trace = model.trace(SENTENCE, 1)
    assert model.arch.layers[0]["q"][0].dtype == torch.float32
    # the same as the float32 model whose weights are the bf16 values
    rounded = tmp_path / "rounded"
    rounded.mkdir()
    for f in ("config.json", "tokenizer.json"):
        (rounded / f).write_bytes((src / f).read_bytes())
    save_file({k: v.to(torch.bfloat16).float() for k, v in state.items()},
              str(rounded / "model.safetensors"))  # fmt: skip
    expected = load_model(rounded, device="cpu").trace(SENTENCE, 1)
    np.testing.assert_array_equal(trace["output"].array, expected["output"].array)


def test_layers_beyond_the_budget_are_freed(llama_state, lazy):
    src, _ = llama_state
    model = load_model(src, device="cpu")
    store: LayerStore = model.arch.layers
    store.budget = 1  # keep only the layer in use
    model.trace(SENTENCE, 2)
    assert [store.cached(i) for i in range(LAYERS)] == [False, False, True]
    assert store.reads == LAYERS


# --- refusals: never an approximate trace ----------------------------------------------------
def edit_config(src, dst, **changes):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).symlink_to(f)
    (dst / "config.json").unlink()
    cfg = {**json.loads((src / "config.json").read_text()), **changes}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize(
    "model_type, changes, words",
    [
        ("llama", {"rope_parameters": {"rope_type": "dynamic", "factor": 4.0}}, ["'dynamic'", "llama3, yarn"]),
        ("mistral", {"rope_scaling": {"type": "dynamic", "factor": 2.0}}, ["'dynamic'", "linear"]),
        ("phi3", {"rope_parameters": {"rope_type": "longrope"}}, ["'longrope'", "default"]),
        ("qwen2", {"layer_types": ["chunked_attention"] * LAYERS}, ["'chunked_attention'"]),
        ("gemma2", {"use_bidirectional_attention": True}, ["use_bidirectional_attention"]),
    ],
)
def test_refusals_name_the_family_and_what(llama_state, tmp_path, model_type, changes, words):
    src, _ = llama_state
    folder = edit_config(src, tmp_path / "m", model_type=model_type, **changes)
    with pytest.raises(InputError) as info:
        load_model(folder, device="cpu")
    message = str(info.value)
    assert "\n" not in message and f"{model_type} model" in message
    for word in words:
        assert word in message


def test_roberta_relative_positions_refused(tmp_path):
    (tmp_path / "src").mkdir()
    build(tmp_path / "src", "roberta")
    folder = edit_config(tmp_path / "src", tmp_path / "m", position_embedding_type="relative_key")
    with pytest.raises(InputError, match="roberta model: unsupported position_embedding_type "
                       "'relative_key'; supported: absolute"):  # fmt: skip
        load_model(folder, device="cpu")
