"""``why``: one score split into query-source × key-source terms, against float64 references written here.

- the toy: x = e + p with given embeddings and torch.nn.MultiheadAttention's weights; the four terms
  (e·e, e·p, p·e, p·p) and the biases from the notes' formulas;
- GPT-2 (LayerNorm, learned positions, biases) and LLaMA (RMSNorm, rotary, grouped kv heads): random
  transformers models run in float64, each head's write taken at the input of its output projection
  (a hook) and each MLP's output at its module, the traced layer's norm frozen by hand, rotary by
  transformers' own ``apply_rotary_pos_emb``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from engine_refs import make_mha, mha_to_weights

from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine.pipeline import run
from models.files.run_files import spec_from_args
from models.reads.params import toy_params
from models.reads.why import why, why_row

transformers = pytest.importorskip("transformers")


def sinusoid(n: int, d: int) -> np.ndarray:
    """The notes: p[i, 2j] = sin(i / 10000^(2j/d)), p[i, 2j+1] = cos(i / 10000^(2j/d))."""
    p = np.zeros((n, d))
    for i in range(n):
        for j in range(0, d, 2):
            p[i, j] = np.sin(i / 10000 ** (j / d))
            p[i, j + 1] = np.cos(i / 10000 ** (j / d))
    return p


def check_table(result: dict, names_q, names_k, reference: np.ndarray) -> None:
    assert result["query_sources"] == list(names_q) and result["key_sources"] == list(names_k)
    table = np.asarray(result["table"])
    scale = np.abs(reference).sum()
    assert np.abs(table - reference).max() <= 1e-5 * scale, np.abs(table - reference).max() / scale
    assert abs(table.sum() - result["score"]) <= 1e-5 * max(abs(result["score"]), scale)


@pytest.mark.parametrize("pe, bias", [("sinusoidal", True), ("sinusoidal", False), ("none", True)])
def test_toy_four_terms_against_the_notes(pe, bias):
    d, heads, n = 16, 2, 5
    rng = np.random.default_rng(3)
    e = rng.normal(size=(n, d)).astype(np.float32)
    w = mha_to_weights(make_mha(d, heads, seed=4))
    if not bias:
        w = type(w)(W_q=w.W_q, W_k=w.W_k, W_v=w.W_v, W_o=w.W_o)
    req = AttentionRequest(AttentionConfig(heads=heads, d_model=d, pe=pe, mask="causal"), embeddings=e, weights=w)
    trace = run(req)
    p = sinusoid(n, d) if pe == "sinusoidal" else None
    for head, i, j in ((0, 4, 1), (1, 3, 3), (1, 2, 0)):
        result = why(trace, head, i, j, params=toy_params(req))
        q = {"embed": e[i].astype(np.float64)}
        k = {"embed": e[j].astype(np.float64)}
        if p is not None:
            q["pos"], k["pos"] = p[i], p[j]
        qv = [v @ w.W_q[head].astype(np.float64) for v in q.values()]
        kv = [v @ w.W_k[head].astype(np.float64) for v in k.values()]
        if bias:
            qv.append(w.b_q[head].astype(np.float64))
            kv.append(w.b_k[head].astype(np.float64))
        names = list(q) + (["bias"] if bias else [])
        reference = np.array([[a @ b for b in kv] for a in qv]) / np.sqrt(d // heads)
        check_table(result, names, names, reference)
        np.testing.assert_allclose(result["score"], trace["scaled"].cell(head, i, j), rtol=0, atol=0)


def test_toy_row_split_is_top_key_minus_weighted_mean():
    req = AttentionRequest(AttentionConfig(heads=2, d_model=16, pe="sinusoidal", bias=True, mask="causal"),
                           sentence="the cat sat on the mat")  # fmt: skip
    trace, params = run(req), toy_params(req)
    result = why_row(trace, 1, 5, params=params)
    weights = trace["weights"].head(1)[5]
    top = int(np.argmax(weights))
    assert result["top_key"] == top
    tables = np.array([why(trace, 1, 5, j, params=params)["table"] for j in range(6)])  # (keys, A, B)
    expected = tables[top] - np.einsum("j,jab->ab", weights[:6], tables)
    np.testing.assert_allclose(result["table"], expected, atol=1e-6)  # float32 weights sum to 1 ± 1e-7
    scores = trace["scaled"].head(1)[5, :6]
    assert abs(result["margin"] - (scores[top] - weights[:6] @ scores)) < 1e-5


def test_toy_additive_score_is_refused_in_one_line():
    req = AttentionRequest(AttentionConfig(score="additive"), sentence="the cat sat")
    with pytest.raises(InputError, match="additive score is not a product"):
        why(run(req), 0, 1, 1, params=toy_params(req))


# --- GPT-2 and LLaMA against transformers in float64 ------------------------------------------------


def _hooked(ref, attn_out_proj, mlps, ids):
    """Run ``ref`` in float64; each layer's concat of head outputs and MLP output, hidden states."""
    concat, mlp_out = {}, {}
    hooks = []
    for i, (proj, mlp) in enumerate(zip(attn_out_proj, mlps)):
        hooks.append(proj.register_forward_pre_hook(lambda m, args, i=i: concat.__setitem__(i, args[0][0])))
        hooks.append(mlp.register_forward_hook(lambda m, args, out, i=i: mlp_out.__setitem__(i, out[0])))
    with torch.no_grad():
        out = ref(torch.tensor([ids]), output_hidden_states=True)
    for h in hooks:
        h.remove()
    return concat, mlp_out, [s[0] for s in out.hidden_states]


def _sources_below(layer, heads, dk, first, concat, mlp_out, w_o_of, b_o_of, states):
    """embed/pos, then per layer: each head's write, the attention bias, the MLP; checked against h_L."""
    src = dict(first)
    for i in range(layer):
        w_o = w_o_of(i)  # (h·d_k, d)
        for g in range(heads):
            src[f"L{i} H{g}"] = concat[i][:, g * dk : (g + 1) * dk] @ w_o[g * dk : (g + 1) * dk]
        if b_o_of(i) is not None:
            src[f"L{i} attn bias"] = b_o_of(i).expand_as(states[0])
        src[f"L{i} mlp"] = mlp_out[i]
    torch.testing.assert_close(sum(src.values()), states[layer], atol=1e-10, rtol=0)
    return src


def test_gpt2_against_transformers_float64(tmp_path):
    from generate_refs import PROMPT, build

    from models.pretrained import load_model

    ref = build(transformers, tmp_path, "gpt2").double().requires_grad_(False)
    model = load_model(tmp_path, device="cpu")
    base, layer = ref.transformer, 2
    ids = model.tokenize(PROMPT)[1]
    n, d, heads = len(ids), base.config.n_embd, base.config.n_head
    dk = d // heads
    concat, mlp_out, states = _hooked(base, [b.attn.c_proj for b in base.h], [b.mlp for b in base.h], ids)
    first = {"embed": base.wte.weight[ids], "pos": base.wpe.weight[:n]}
    src = _sources_below(layer, heads, dk, first, concat, mlp_out, lambda i: base.h[i].attn.c_proj.weight,
                         lambda i: base.h[i].attn.c_proj.bias, states)  # fmt: skip
    block = base.h[layer]
    x = states[layer]
    sigma = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + block.ln_1.eps)  # frozen at the real run

    def normed(v):
        return (v - v.mean(-1, keepdim=True)) / sigma * block.ln_1.weight

    w, b = block.attn.c_attn.weight, block.attn.c_attn.bias  # Conv1D: (d, 3d)
    trace = model.trace(PROMPT, layer)
    for head, i, j in ((0, n - 1, 2), (3, 5, 5), (2, n - 1, 0)):
        qc, kc = slice(head * dk, (head + 1) * dk), slice(d + head * dk, d + (head + 1) * dk)
        q = [normed(v)[i] @ w[:, qc] for v in src.values()] + [block.ln_1.bias @ w[:, qc] + b[qc]]
        k = [normed(v)[j] @ w[:, kc] for v in src.values()] + [block.ln_1.bias @ w[:, kc] + b[kc]]
        reference = (torch.stack(q) @ torch.stack(k).T / np.sqrt(dk)).numpy()
        names = list(src) + ["bias"]
        check_table(why(trace, head, i, j, model=model), names, names, reference)


def test_llama_gqa_rotary_against_transformers_float64(tmp_path):
    from generate_refs import PROMPT, build
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from models.pretrained import load_model

    ref = build(transformers, tmp_path, "llama-gqa").double().requires_grad_(False)
    model = load_model(tmp_path, device="cpu")
    base, layer = ref.model, 2
    ids = model.tokenize(PROMPT)[1]
    n, cfg = len(ids), base.config
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    dk = cfg.hidden_size // heads
    blocks = base.layers
    concat, mlp_out, states = _hooked(base, [b.self_attn.o_proj for b in blocks], [b.mlp for b in blocks], ids)
    src = _sources_below(layer, heads, dk, {"embed": base.embed_tokens.weight[ids]}, concat, mlp_out,
                         lambda i: base.layers[i].self_attn.o_proj.weight.T, lambda i: None, states)  # fmt: skip
    block = base.layers[layer]
    x = states[layer]
    inv_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + block.input_layernorm.variance_epsilon)
    parts = torch.stack([v * inv_rms * block.input_layernorm.weight for v in src.values()])  # (S, n, d)
    with torch.no_grad():
        cos, sin = base.rotary_emb(x[None], torch.arange(n)[None])
    trace = model.trace(PROMPT, layer)
    for head, i, j in ((0, n - 1, 3), (3, 6, 6), (1, n - 1, 0)):
        g = head // (heads // kv)  # the key head this query head reads
        attn = block.self_attn
        wq = attn.q_proj.weight[head * dk : (head + 1) * dk].T
        wk = attn.k_proj.weight[g * dk : (g + 1) * dk].T
        q = torch.cat([parts @ wq, torch.zeros(1, n, dk, dtype=torch.float64)])  # no biases: bias = 0
        k = torch.cat([parts @ wk, torch.zeros(1, n, dk, dtype=torch.float64)])
        q, k = apply_rotary_pos_emb(q[:, None], k[:, None], cos, sin)
        reference = (q[:, 0, i] @ k[:, 0, j].T * dk**-0.5).numpy()
        names = list(src) + ["bias"]
        check_table(why(trace, head, i, j, model=model), names, names, reference)


def test_cli_json_sums_and_errors(capsys):
    from models.cli.why import why_main

    args = ["--cell", "1,4,2", "--sentence", "The cat sat on the mat.", "--pe", "sinusoidal", "--bias"]
    assert why_main(args + ["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["query_sources"] == ["embed", "pos", "bias"] == result["key_sources"]
    assert abs(np.sum(result["table"]) - result["score"]) <= 1e-5 * np.abs(result["table"]).sum()
    assert why_main(["--cell", "0,9,1", "--sentence", "The cat sat."]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: why: row 9 is out of range")
    assert why_main(["--cell", "0,1", "--sentence", "The cat sat."]) == 2
    assert capsys.readouterr().err.startswith("error: --cell takes head,row,col")


def test_api_from_a_spec_or_a_trace_gives_the_same_dict():
    from models.cli.why import build_why_parser
    from models.pretrained import load_model

    sentence = "The cat sat on the mat."
    args = build_why_parser().parse_args(["--cell", "3,4,2", "--model", "minilm", "--layer", "2", "--sentence", "x"])
    args.sentence = sentence
    from_spec = why(spec_from_args(args).validate(), 3, 4, 2)
    trace = load_model("minilm", device="cpu").trace(sentence, 2)
    from_trace = why(trace, 3, 4, 2)  # the model read again from the trace's folder
    assert from_spec == from_trace and from_spec["layer"] == 2
    with pytest.raises(InputError, match="toy trace needs its LayerParams"):
        why(run(AttentionRequest(sentence="the cat sat")), 0, 1, 1)


def test_toy_cross_attention_and_general_score_against_the_formula():
    """Cross-attention: the query sources come from the second sentence (its own embedding and positions);
    the general score: T[a, b] = q^a W_g k^bᵀ."""
    d, heads = 16, 2
    rng = np.random.default_rng(5)
    e_k, e_q = rng.normal(size=(6, d)).astype(np.float32), rng.normal(size=(4, d)).astype(np.float32)
    req = AttentionRequest(AttentionConfig(heads=heads, d_model=d, pe="sinusoidal", score="general", bias=True),
                           embeddings=e_k, cross_embeddings=e_q)  # fmt: skip
    trace, params = run(req), toy_params(req)
    head, i, j = 1, 3, 4
    result = why(trace, head, i, j, params=params)
    p_q, p_k = sinusoid(4, d), sinusoid(6, d)
    wq, wk = params.W_q[head].astype(np.float64), params.W_k[head].astype(np.float64)
    q = [e_q[i] @ wq, p_q[i] @ wq, params.b_q[head].astype(np.float64)]
    k = [e_k[j] @ wk, p_k[j] @ wk, params.b_k[head].astype(np.float64)]
    w_g = params.extra["W_g"][head].astype(np.float64)
    reference = np.array([[a @ w_g @ b for b in k] for a in q])
    names = ["embed", "pos", "bias"]
    check_table(result, names, names, reference)
    assert result["stage"] == "scores" and result["score"] == float(trace["scores"].cell(head, i, j))


def test_the_same_split_whether_the_model_kept_this_runs_states_or_not():
    """The layers below are read from the model's kept hidden states when they are this trace's, else
    run again: a trace whose states were replaced since (another sentence, another mask) gives the same."""
    from models.pretrained import load_model

    model = load_model("minilm", device="cpu")
    trace = model.trace("The cat sat on the mat.", 2)
    kept = why(trace, 3, 4, 2, model=model)
    model.trace("A dog ran in the park today.", 2)  # the model now keeps another sentence's states
    again = why(trace, 3, 4, 2, model=model)
    model.trace("The cat sat on the mat.", 2, mask="causal")  # the same sentence, another mask: other states
    masked = why(trace, 3, 4, 2, model=model)
    assert kept["table"] == again["table"] == masked["table"]


def test_a_row_too_big_to_hold_still_splits_the_cell(monkeypatch):
    from models.pretrained import load_model
    from models.reads import why_sides

    model = load_model("minilm", device="cpu")
    trace = model.trace("The cat sat on the mat.", 2)
    whole = why(trace, 3, 4, 2, model=model, with_row=True)
    monkeypatch.setattr(why_sides, "MAX_BYTES", 300_000)  # two rows' sources fit, all nine do not
    result = why(trace, 3, 4, 2, model=model, with_row=True)
    np.testing.assert_allclose(result["table"], whole["table"], rtol=1e-12, atol=1e-12)  # float64, other batching
    assert "row_split" not in result
    assert result["row_note"].startswith("why: 34 sources × 9 key rows are too many to hold; at most 2 key rows fit")
    monkeypatch.setattr(why_sides, "MAX_BYTES", 1_000)
    with pytest.raises(InputError, match="too many to hold"):
        why(trace, 3, 4, 2, model=model)
