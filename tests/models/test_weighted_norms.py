"""Value-weighted attention (Kobayashi et al., 2020): ``weighted_norms`` ‖α_ij f_h(x_j)‖ and
``value_norms`` ‖f_h(x_j)‖ with f_h(x) = (x W_V^h + b_V^h) W_O^h, against float64 references built
from torch's nn.MultiheadAttention (the toy engine) and from transformers' own modules run in
float64 (MiniLM, a random GPT-2, a random LLaMA with grouped-query heads)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.config import AttentionConfig, AttentionRequest
from models.engine.pipeline import run
from models.engine.stages import STAGE_ORDER
from models.pretrained import load_model, resolve_model
from models.reads.explain import explain
from models.reads.params import pretrained_params

transformers = pytest.importorskip("transformers")


def reference_norms(a: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a (h, n_q, n_k) weights, f (h, n_k, d_out) transformed values -> ‖α f‖ written out, ‖f‖."""
    weighted = np.linalg.norm(a[..., None] * f[:, None, :, :], axis=-1)  # (h, n_q, n_k)
    return weighted, np.linalg.norm(f, axis=-1)


def check(trace, a: np.ndarray, f: np.ndarray) -> None:
    weighted, norms = reference_norms(a, f)
    assert trace["weighted_norms"].shape == weighted.shape and trace["value_norms"].shape == norms.shape
    np.testing.assert_allclose(trace["value_norms"].array, norms, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(trace["weighted_norms"].array, weighted, rtol=2e-5, atol=1e-6)
    # one block of rows of one head reads the same numbers as the whole stage
    np.testing.assert_array_equal(trace["weighted_norms"].rows(1, 2, 4), trace["weighted_norms"].array[1, 2:4])


# --- the toy engine against nn.MultiheadAttention ------------------------------------------------
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_toy_against_multihead_attention(mask):
    cfg = AttentionConfig(heads=2, d_model=8, bias=True, mask=mask, seed=3)
    trace = run(AttentionRequest(config=cfg, sentence="the cat sat on the mat today"))
    from models.reads.params import toy_params

    p = toy_params(AttentionRequest(config=cfg, sentence="the cat sat on the mat today"))
    h, d, dk = 2, 8, 4
    mha = torch.nn.MultiheadAttention(d, h, bias=True, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate(
            [np.concatenate(list(w), axis=1) for w in (p.W_q, p.W_k, p.W_v)], axis=1).T))
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([b.reshape(-1) for b in (p.b_q, p.b_k, p.b_v)])))
        mha.out_proj.weight.copy_(torch.from_numpy(p.W_o.T))
        mha.out_proj.bias.copy_(torch.from_numpy(p.b_o))
        x = torch.from_numpy(trace["input"].array).double()[None]  # (1, n, d)
        n = x.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool).triu(1) if mask == "causal" else None
        _, a = mha(x, x, x, attn_mask=causal, need_weights=True, average_attn_weights=False)  # (1, h, n, n)
        v = torch.nn.functional.linear(x[0], mha.in_proj_weight[2 * d :], mha.in_proj_bias[2 * d :])  # (n, d)
        w_o = mha.out_proj.weight.T  # (h·d_v, d_out)
        f = torch.stack([v[:, i * dk : (i + 1) * dk] @ w_o[i * dk : (i + 1) * dk] for i in range(h)])
    np.testing.assert_allclose(trace["weights"].array, a[0].numpy(), atol=1e-6)
    check(trace, a[0].numpy(), f.numpy())


def test_catalogue_places_them_after_the_weights():
    order = list(STAGE_ORDER)
    assert order.index("weights") + 1 == order.index("weighted_norms") < order.index("value_norms") < \
        order.index("head_output")
    trace = run(AttentionRequest(config=AttentionConfig(), sentence="a b c"))
    names = list(trace.names)
    assert names[names.index("weights") + 1 : names.index("weights") + 3] == ["weighted_norms", "value_norms"]
    s = trace["weighted_norms"]
    assert s.title == "Weighted norms" and "‖f_h(x_j)‖" in s.formula and "Kobayashi" in s.description
    assert trace["value_norms"].row_labels == ("H0", "H1") and trace["value_norms"].row_axis == "head"


# --- transformers' modules in float64 ------------------------------------------------------------
def float64_reference(ref, family: str, ids: list[int], layer: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights (h, n, n), f (h, n, d_model)) of ``layer``, from the model's own modules in float64."""
    ref = ref.double().eval()
    cfg = ref.config
    h = cfg.num_attention_heads
    if family == "bert":
        att = ref.encoder.layer[layer].attention
        value, w_o = att.self.value, att.output.dense.weight.T  # nn.Linear: (out, in)
        take = lambda out: out  # noqa: E731
    elif family == "gpt2":
        att = ref.h[layer].attn
        value, w_o = att.c_attn, att.c_proj.weight  # Conv1D: (in, out)
        take = lambda out: out[..., 2 * cfg.n_embd :]  # noqa: E731
    else:
        att = ref.layers[layer].self_attn
        value, w_o = att.v_proj, att.o_proj.weight.T
        take = lambda out: out  # noqa: E731
    seen = {}

    def keep(module, inputs, out) -> None:  # returns None: the module's output is left as it is
        seen.setdefault("v", take(out)[0])

    hook = value.register_forward_hook(keep)
    try:
        with torch.no_grad():
            got = ref(torch.tensor([ids]), output_attentions=True)
    finally:
        hook.remove()
    a = got.attentions[layer][0].numpy()  # (h, n, n)
    v = seen["v"]  # (n, kv·d_k)
    d_k = w_o.shape[0] // h
    kv = v.shape[-1] // d_k
    with torch.no_grad():
        f = torch.stack([v[:, (i // (h // kv)) * d_k : (i // (h // kv) + 1) * d_k] @ w_o[i * d_k : (i + 1) * d_k]
                         for i in range(h)])  # fmt: skip
    return a, f.numpy()


def test_minilm_against_its_own_modules():
    model = load_model("minilm", device="cpu")
    ref = transformers.AutoModel.from_pretrained(resolve_model("minilm"), attn_implementation="eager")
    for layer in (0, 3, 5):
        trace = model.trace("The quick brown fox jumps over the lazy dog.", layer)
        a, f = float64_reference(ref, "bert", trace.meta["token_ids"], layer)
        check(trace, a, f)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_decoders_against_their_own_modules(tmp_path, family):
    from test_survey import SENTENCE, build

    folder, ref = build(tmp_path, family)
    model = load_model(folder, device="cpu")
    if family == "llama":
        assert model.num_kv_heads < model.num_heads  # grouped-query heads
    for layer in range(model.num_layers):
        trace = model.trace(SENTENCE, layer)
        a, f = float64_reference(ref, family, trace.meta["token_ids"], layer)
        check(trace, a, f)
        params = pretrained_params(model, layer, len(trace.query_tokens), mask=trace.config["mask"])
        d = explain(trace, params, "weighted_norms", (3, 6, 2))
        assert d.details["weight"] * d.details["value_norm"] == pytest.approx(d.value, rel=1e-5)
        assert explain(trace, params, "value_norms", (3, 2)).value == pytest.approx(np.linalg.norm(f[3, 2]), rel=2e-5)


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_weighted_norms_after_the_weights_reuse_them_bit_for_bit(mask):
    """A whole trace reads the weights, then the weighted norms: those come from the cached weights
    (no second pass from Q and K), and equal exactly those of a trace whose weights were never read."""
    cfg = AttentionConfig(heads=3, d_model=12, bias=True, mask=mask, seed=5)
    request = AttentionRequest(config=cfg, sentence="the cat sat on the mat and the dog sat too")
    fresh = run(request)["weighted_norms"].array
    trace = run(request)
    trace["weights"].array  # noqa: B018 - read (and cached) first
    computed = []
    trace["weighted_norms"].store.on_compute = lambda name, head, block: computed.append(name)
    np.testing.assert_array_equal(trace["weighted_norms"].array, fresh)
    assert "weighted_norms" not in computed
