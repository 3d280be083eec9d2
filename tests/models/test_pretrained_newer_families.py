"""OLMo 2, SmolLM3, Granite, Qwen2/3-MoE, StarCoder2, StableLM and Cohere against transformers.

Each random model (tests/models/newer_families.py) is loaded with models.pretrained; every layer's
attention weights and the hidden states must match transformers' eager attention to 1e-5, the
family's own step must show where it changes the numbers (checked against the reference model's
own tensors, not ours), every stage must explain itself, and what cannot be reproduced is refused
in one line naming the family.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from newer_families import NEWER, build
from test_pretrained_families import SENTENCE
from zoo import WINDOW

from models.config import InputError
from models.pretrained import SUPPORTED_TYPES, load_model
from models.pretrained.common import attention, hidden_mask
from models.pretrained.moe import route
from models.pretrained.registry import is_loadable
from models.reads.explain import explain
from models.reads.params import pretrained_params

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``built(name)``: (folder, transformers' model), built once per module."""
    cache = {}

    def get(name: str):
        if name not in cache:
            folder = tmp_path_factory.mktemp(name)
            cache[name] = (folder, build(folder, name))
        return cache[name]

    return get


def test_the_families_are_supported_and_listed():
    assert {case.family for case in NEWER.values()} <= set(SUPPORTED_TYPES)


@pytest.mark.parametrize("name", list(NEWER))
def test_family_matches_transformers(built, name):
    folder, ref = built(name)
    assert is_loadable(folder) == NEWER[name][0]  # the model chooser lists it (from the cache too)
    model = load_model(folder, device="cpu")
    assert model.model_type == NEWER[name][0] and model.num_layers == 3
    _, ids = model.tokenize(SENTENCE)
    n = len(ids)
    assert n > WINDOW + 2
    with torch.no_grad():
        out = ref(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for layer in range(model.num_layers):
        trace = model.trace(SENTENCE, layer)
        np.testing.assert_allclose(trace["weights"].array, out.attentions[layer][0].numpy(), atol=1e-5, rtol=0)
        check_own_step(name, ref, trace, layer, n)
    states = model.hidden_states(SENTENCE)
    assert len(states) == len(out.hidden_states) == model.num_layers + 1
    for mine, theirs in zip(states, out.hidden_states):
        np.testing.assert_allclose(mine, theirs[0].numpy(), atol=1e-5, rtol=0)


def _w(t) -> np.ndarray:
    return t.detach().numpy().astype(np.float64)


def _windowed(trace, n: int, window: int) -> None:
    masked = trace["masked"].array
    i = np.arange(n)
    hidden = (i[:, None] - i[None, :]) >= window
    assert trace.config["sliding_window"] == window
    assert hidden.any() and np.all(np.isneginf(masked[:, hidden]))
    assert f"a sliding window of {window}" in trace["masked"].description


def _layer_normed(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """Per-head LayerNorm without bias, each head with its own weights: x (h, n, d_k), w (h, d_k)."""
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w[:, None, :]


def check_own_step(name: str, ref, trace, layer: int, n: int) -> None:
    """The family's own step, where it changes the numbers, from the reference model's tensors."""
    attn = ref.layers[layer].self_attn
    q = trace["q"].array.astype(np.float64)  # (h, n, d_k)
    if name.startswith("olmo2"):  # one RMS norm over the whole projection, before the heads split
        h, _, dk = q.shape
        flat = q.transpose(1, 0, 2).reshape(n, h * dk)
        eps = ref.config.rms_norm_eps
        want = flat / np.sqrt((flat**2).mean(-1, keepdims=True) + eps) * _w(attn.q_norm.weight)
        np.testing.assert_allclose(trace["q_normed"].array, want.reshape(n, h, dk).transpose(1, 0, 2), atol=1e-5)
        assert "all 4 heads" in trace["q_normed"].formula and "before it is split" in trace["q_normed"].description
        assert trace["input"].formula == "X = h_L"  # no norm before the attention
    elif name.startswith(("stablelm-qknorm", "cohere")):  # per-head LayerNorms, each head its own weights
        if name.startswith("stablelm"):
            w, eps = np.stack([_w(m.weight) for m in attn.q_layernorm.norms]), ref.config.layer_norm_eps
        else:
            w, eps = _w(attn.q_norm.weight), ref.config.layer_norm_eps
        assert not np.allclose(w[0], w[1])
        np.testing.assert_allclose(trace["q_normed"].array, _layer_normed(q, w, eps), atol=1e-5)
        assert "mean" in trace["q_normed"].formula and "own learned weights" in trace["q_normed"].description
    elif name.startswith("qwen3_moe"):
        assert "rms" in trace["q_normed"].formula
    else:
        assert "q_normed" not in trace
    if name.startswith("cohere"):  # RoPE on the interleaved pairs (2j, 2j + 1)
        x = trace["q_normed"].array.astype(np.float64)
        dk = x.shape[-1]
        inv = 1.0 / ref.config.rope_parameters["rope_theta"] ** (np.arange(0, dk, 2) / dk)
        angle = np.repeat(np.arange(n)[:, None] * inv, 2, axis=-1)  # (n, d_k): θ0 θ0 θ1 θ1 …
        turned = np.stack([-x[..., 1::2], x[..., ::2]], axis=-1).reshape(x.shape)
        np.testing.assert_allclose(trace["q_rotated"].array, x * np.cos(angle) + turned * np.sin(angle), atol=1e-5)
        assert "(2j, 2j + 1)" in trace["q_rotated"].description
    if name.startswith("stablelm"):  # partial rotary: the features past rotary_dim pass unchanged
        rd, dk = trace.config["rotary_dim"], trace.config["d_k"]
        assert rd == dk * (0.5 if "partial" in name else 0.25)
        source = trace["q_normed" if "q_normed" in trace else "q"].array
        np.testing.assert_array_equal(source[..., rd:], trace["q_rotated"].array[..., rd:])
    if name.startswith("smollm3"):  # layer 1 of 3 is NoPE (interval 2) and slides (its default type)
        nope = layer == 1
        assert ("q_rotated" in trace) != nope and trace.config["pe"] == ("none" if nope else "rotary")
        assert any("NoPE" in note for note in trace.meta["notices"]) == nope
        if nope:
            _windowed(trace, n, WINDOW)
        else:
            assert trace.config["sliding_window"] is None
    if name.startswith("granite"):  # attention_multiplier replaces 1/√d_k
        assert trace.config["scale"] == pytest.approx(0.2)
        np.testing.assert_allclose(trace["scaled"].array, trace["scores"].array * np.float32(0.2), rtol=1e-6)
        assert trace["scaled"].formula.startswith("S_h × 0.2 (attention_multiplier)")
    if name.startswith("starcoder2"):
        _windowed(trace, n, WINDOW)
        assert trace.config["bias"] and "+ b_Q" in trace["q"].formula
    if name.startswith("qwen2_moe"):  # window on the even layers below max_window_layers=2
        if layer == 0:
            _windowed(trace, n, WINDOW)
        else:
            assert trace.config["sliding_window"] is None


@pytest.mark.parametrize("name", ["qwen2_moe-shared-window", "qwen3_moe-qknorm-topk"])
def test_moe_routing_is_exercised_and_matches_the_router(built, name):
    """Several experts are really chosen, top-2 per token, with the reference router's weights."""
    folder, ref = built(name)
    model = load_model(folder, device="cpu")
    _, ids = model.tokenize(SENTENCE)
    arch, n = model.arch, len(ids)
    layer = arch.layers[0]["moe"]
    with torch.no_grad():
        h = torch.from_numpy(model.hidden_states(SENTENCE)[0])  # the embeddings entering layer 0
        a = attention(arch.attention_input(0, h), arch.attention_params(0, n), hidden_mask(n, "causal", (), h.device))
        x = arch.rms(h + a, arch.layers[0]["norm_mlp"])  # what layer 0's MLP reads
        weights, experts = route(layer["router"], x, arch.moe)
        _, their_weights, their_experts = ref.layers[0].mlp.gate(x[None])
    assert experts.shape == (len(ids), 2) and len(set(experts.flatten().tolist())) >= 3
    np.testing.assert_array_equal(experts.numpy(), their_experts.numpy())
    np.testing.assert_allclose(weights.numpy(), their_weights.detach().numpy(), atol=1e-6)
    if model.arch.moe.norm_topk_prob:
        np.testing.assert_allclose(weights.sum(-1).numpy(), 1.0, atol=1e-6)
    else:
        assert float(weights.sum(-1).max()) < 1.0
    assert ("shared" in layer) == name.startswith("qwen2_moe")
    if name.startswith("qwen2_moe"):  # mlp_only_layers=[1]: an ordinary MLP between routed layers
        assert "moe" not in model.arch.layers[1] and "moe" in model.arch.layers[2]


@pytest.mark.parametrize("name", list(NEWER))
def test_every_stage_explains_itself(built, name):
    folder, _ = built(name)
    model = load_model(folder, device="cpu")
    rng = np.random.default_rng(0)
    for layer in (0, 1):
        trace = model.trace(SENTENCE, layer)
        n = len(trace.query_tokens)
        params = pretrained_params(model, layer, n, trace.config["mask"], trace.config["pad_positions"])
        for stage in trace.stages:
            for _ in range(3):
                cell = tuple(int(rng.integers(0, s)) for s in stage.shape)
                d = explain(trace, params, stage.name, cell)
                value = float(stage.array[cell])
                assert d.value == value or (np.isneginf(d.value) and np.isneginf(value)), (stage.name, cell)
                if d.sum_of and np.isfinite(value):
                    terms = np.array([t.value for t in d.sum_of], dtype=np.float64)
                    tolerance = 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(terms).sum()))
                    assert abs(terms.sum() - value) <= tolerance, (stage.name, cell, terms.sum(), value)
                if stage.name in ("q_normed", "k_normed"):  # the derivation's own arithmetic gives the value
                    shown = float(d.formula.rsplit("= ", 1)[1].replace("−", "-"))
                    assert shown == pytest.approx(value, rel=1e-4, abs=1e-5), (stage.name, cell, d.formula)


def _altered(src, dst, **values):
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "config.json":
            (dst / f.name).symlink_to(f)
    cfg = {**json.loads((src / "config.json").read_text()), **values}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


REFUSALS = {
    "smollm3-nope-list": ("smollm3-nope-window", dict(no_rope_layers=[1, "0", 1]), "no_rope_layers must list 0 or 1"),
    "smollm3-nope-short": ("smollm3-nope-window", dict(no_rope_layers=[1, 0]), "for each of the 3 layers"),
    "granite-multiplier-text": ("granite-multipliers", dict(attention_multiplier="big"),
                                "attention_multiplier must be a number, got 'big'"),
    "granite-residual-nan": ("granite-multipliers", dict(residual_multiplier=float("nan")),
                             "residual_multiplier must be a positive number, got nan"),
    "qwen3_moe-topk": ("qwen3_moe-qknorm-topk", dict(num_experts_per_tok=5), "num_experts_per_tok=5 exceeds"),
    "qwen2_moe-dense-layers": ("qwen2_moe-shared-window", dict(mlp_only_layers="1"),
                               "mlp_only_layers must list layer numbers"),
    "stablelm-parallel-text": ("stablelm-parallel", dict(use_parallel_residual="yes"),
                               "use_parallel_residual must be true or false"),
    "cohere-rope-yarn": ("cohere-qknorm", dict(rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                                                                "factor": 2.0}),
                         "cohere model: unsupported rope type 'yarn'"),
    "olmo2-rope-dynamic": ("olmo2-gqa", dict(rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0,
                                                              "factor": 2.0}),
                           "olmo2 model: unsupported rope type 'dynamic'"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSALS))
def test_what_cannot_be_reproduced_is_refused_in_one_line(built, tmp_path, case):
    name, values, message = REFUSALS[case]
    folder = _altered(built(name)[0], tmp_path / "m", **values)
    with pytest.raises(InputError) as info:
        load_model(folder, device="cpu")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_fused_expert_tensors_give_the_same_model(built, tmp_path):
    """Experts stored fused (``mlp.experts.gate_up_proj`` (E, 2I, d), ``down_proj`` (E, d, I), as
    transformers 5 holds them) read the same as experts stored one by one (the hub's layout)."""
    from safetensors.torch import load_file, save_file

    src, _ = built("qwen2_moe-shared-window")
    folder = _altered(src, tmp_path / "fused")
    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    for layer in (0, 2):
        p = f"layers.{layer}.mlp.experts."
        take = [[tensors.pop(f"{p}{e}.{part}_proj.weight") for e in range(4)] for part in ("gate", "up", "down")]
        gate, up, down = (torch.stack(t) for t in take)
        tensors[p + "gate_up_proj"] = torch.cat([gate, up], dim=1)  # (E, 2I, d)
        tensors[p + "down_proj"] = down  # (E, d, I)
    save_file(tensors, str(folder / "model.safetensors"))
    fused, single = load_model(folder, device="cpu"), load_model(src, device="cpu")
    for a, b in zip(fused.hidden_states(SENTENCE), single.hidden_states(SENTENCE)):
        np.testing.assert_array_equal(a, b)


def test_a_big_moe_checkpoint_reads_only_the_layers_up_to_the_traced_one(built, monkeypatch):
    from models.pretrained import loader

    monkeypatch.setattr(loader, "PRELOAD_FILE_BYTES", 0)  # as if the checkpoint were big
    model = load_model(built("qwen3_moe-qknorm-topk")[0], device="cpu")
    store = model.arch.layers
    assert store.reads == 0
    model.trace(SENTENCE, 0)
    assert store.reads == 1 and store.cached(0) and not store.cached(1)
    model.trace(SENTENCE, 1)
    assert store.reads == 2 and not store.cached(2)


def test_a_nan_in_an_expert_is_refused_naming_it(built, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = _altered(built("qwen3_moe-qknorm-topk")[0], tmp_path / "m")
    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    key = "layers.2.mlp.experts.3.down_proj.weight"
    tensors[next(k for k in tensors if k.endswith(key))][1, 3] = float("nan")
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(InputError, match=rf"tensor '{key}' of the checkpoint holds nan at \[1, 3\]"):
        load_model(folder, device="cpu")


@pytest.mark.parametrize("name", ["qwen2_moe-shared-window", "smollm3-nope-window"])
def test_without_layer_types_the_windows_are_transformers_defaults(built, tmp_path, name):
    """An older config.json without ``layer_types``: the windows follow transformers' own defaults
    (Qwen2-MoE: the even layers below max_window_layers; SmolLM3: the NoPE layers)."""
    folder = _altered(built(name)[0], tmp_path / "m", layer_types=None)
    ref = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    model = load_model(folder, device="cpu")
    _, ids = model.tokenize(SENTENCE)
    with torch.no_grad():
        out = ref(torch.tensor([ids]), output_attentions=True)
    windows = [model.trace(SENTENCE, layer).config["sliding_window"] for layer in range(3)]
    assert windows == ([WINDOW, None, None] if name.startswith("qwen2") else [None, WINDOW, None])
    for layer in range(3):
        np.testing.assert_allclose(model.trace(SENTENCE, layer)["weights"].array, out.attentions[layer][0].numpy(),
                                   atol=1e-5, rtol=0)  # fmt: skip
