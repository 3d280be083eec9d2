"""Generation from a big checkpoint: layers read lazily from shards, a bf16 head kept as stored and
converted one block of vocabulary rows at a time; the same tokens, attention and lens as the float32
model whose weights are the bf16 values."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from models.generate import GenerateSettings, generate, head, output_head
from models.pretrained import load_model

pytest.importorskip("transformers")
from tests.models.test_pretrained_lazy import lazy, llama_state, write_sharded  # noqa: E402, F401

PROMPT = "the cat sat on the mat"


def test_bf16_sharded_checkpoint_generates_like_its_float32_twin(llama_state, tmp_path, lazy, monkeypatch):  # noqa: F811
    monkeypatch.setattr(head, "VOCAB_BLOCK", 64)  # several blocks of the ~300-token vocabulary
    src, state = llama_state
    folder, _ = write_sharded(src, state, tmp_path / "bf16", dtype=torch.bfloat16)
    model = load_model(folder, device="cpu")
    settings = GenerateSettings(max_new_tokens=8)
    gen = generate(model, PROMPT, settings)
    assert output_head(model).weight.dtype == torch.bfloat16 and gen.head_source.endswith("lm_head.weight")
    assert model.arch.layers.reads >= 3  # every layer read lazily
    rounded = tmp_path / "rounded"
    rounded.mkdir()
    for f in ("config.json", "tokenizer.json"):
        (rounded / f).write_bytes((src / f).read_bytes())
    save_file({k: v.to(torch.bfloat16).float() for k, v in state.items()}, str(rounded / "model.safetensors"))
    twin = generate(load_model(rounded, device="cpu"), PROMPT, settings)
    assert gen.ids == twin.ids
    np.testing.assert_allclose(gen.attention(), twin.attention(), atol=1e-6, rtol=0)
    np.testing.assert_allclose(gen.lens_prob, twin.lens_prob, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(gen.lens_ids, twin.lens_ids)
