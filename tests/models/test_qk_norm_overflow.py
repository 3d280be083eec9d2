"""Queries and keys that overflow float32 are refused in every family, qk-norm families too (issue 50,
item 11).

Before: a qk-norm family (Qwen3, OLMo 2, Gemma 3, Cohere, StableLM, Phi with ``qk_layernorm``) whose
layer-1 q and k projections were scaled by 1e30 traced with exit 0: the norm's mean square overflowed
to ∞, the normed q and k became 0 and every weight uniform — transformers computes the same, but the
norm of a large vector is well defined (it does not depend on the scale), so the uniform weights are
float32's artefact, not the model's; docs/hardening.md promises a refusal. Every other family refuses
the overflowing scores already. The matrix: the first zoo case of each decoder and encoder family,
and every case whose config turns a qk-norm on, each checked to be a qk-norm or not by its loaded
layer (so the test cannot pass by missing them)."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file, save_file
from zoo import ZOO, build, first_case_of_each_family

from main import main
from models.config import InputError
from models.pretrained import load_model
from models.pretrained.batch_weights import batch_layer_weights, runs_batched
from models.pretrained.loader import ARCHITECTURES, family_kind

transformers = pytest.importorskip("transformers")

TURNED_ON = {name for name, case in ZOO.items() if case.kwargs.get("qk_layernorm") or case.kwargs.get("use_qk_norm")}
CASES = sorted(name for name, case in ZOO.items() if family_kind(case.family) != "encoder-decoder"
               and (name in first_case_of_each_family() or name in TURNED_ON))  # fmt: skip
# Every case with a qk-norm: turned on by its config, or always (the family's class says so).
QK_CASES = sorted(TURNED_ON | {n for n, case in ZOO.items() if getattr(ARCHITECTURES[case.family], "qk_norm", False)
                               and n in first_case_of_each_family()})  # fmt: skip
PROJECTIONS = ("q_proj", "k_proj", "query", "key", "q_lin", "k_lin", "c_attn", "qkv", "qkv_proj", "Wqkv",
               "query_key_value")  # fmt: skip
SENTENCE = "the cat sat on the mat"


def layer_one_projections(name: str) -> bool:
    parts = name.split(".")
    return "1" in parts[:-2] and any(p in PROJECTIONS for p in parts) and parts[-1] in ("weight", "bias")


@pytest.mark.parametrize("case", CASES)
def test_overflowing_queries_and_keys_of_layer_one_are_refused(tmp_path, capsys, case):
    folder = tmp_path / case
    folder.mkdir()
    build(folder, case)
    tensors = load_file(str(folder / "model.safetensors"))
    scaled = [n for n in tensors if layer_one_projections(n)]
    assert scaled, sorted(tensors)
    for n in scaled:
        tensors[n] = tensors[n] * 1e30
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    model = load_model(folder, device="cpu")
    params = model.arch.attention_params(1, 4)
    qk_norm = params.q_norm is not None or params.k_norm is not None
    assert qk_norm or case not in TURNED_ON  # the cases that turn it on have it
    capsys.readouterr()
    out = tmp_path / "out"
    code = main(["export", "--model", str(folder), "--layer", "1", "--sentence", SENTENCE, "--device", "cpu",
                 "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and ("overflows float32" in err or "overflow float32" in err), err
    if qk_norm:
        assert "qk-norm" in err and "layer 1" in err, err
    assert not out.exists()


@pytest.mark.parametrize("case", QK_CASES)
def test_a_batch_of_texts_is_checked_too_and_still_runs_under_vmap(tmp_path, case):
    """The atlas' batched pass (vmap) reads nothing inside the step; the recorded q and k of the batch
    are checked after it. A model that does not overflow still runs under vmap (the check made vmap fall
    back to one text at a time while it read a number inside the step)."""
    folder = tmp_path / case
    folder.mkdir()
    build(folder, case)
    model = load_model(folder, device="cpu")
    encs = [model.encode(t) for t in ("the cat sat", "a dog sat", "the mat")]
    assert batch_layer_weights(model, encs, lambda *_: None) >= 1
    assert runs_batched(model.arch) or "moe" in ZOO[case][0]  # a mixture of experts never runs under vmap
    tensors = load_file(str(folder / "model.safetensors"))
    for n in [n for n in tensors if layer_one_projections(n)]:
        tensors[n] = tensors[n] * 1e30
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    model = load_model(folder, device="cpu")
    with pytest.raises(InputError, match="layer 1: the (queries|keys) overflow float32 in their qk-norm"):
        batch_layer_weights(model, encs, lambda *_: None)
