"""Decoders at long inputs (issue 34): past :data:`models.engine.pairs.LONG_CELLS` cells the layers below
the traced one run without any n × n tensor (``models.engine.attend.attend_blocks``: torch's fused kernel
with ``is_causal``, or the one attention function in blocks of rows where the family's variant needs a
window, sinks or a soft-cap) and the traced layer keeps Q, K, V and each row's statistics.

- a random LLaMA with 131,072 positions, beyond 16,384 tokens: the traced layer's rows, tiles and
  cells equal a float64 softmax of the scores of transformers' own q and k;
- every decoder family of the zoo, the long path forced at a few tokens: every layer's weights equal
  transformers' eager attention, as the short path's tests hold them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from generate_refs import PROMPT
from zoo import build, cases

from models.engine import attend as attend_module
from models.engine import pairs
from models.engine.long_structure import long_structure
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")

LONG = 20480  # beyond 16,384; 2 heads of d_k 16: ~2 s to trace


@pytest.fixture
def long_path(monkeypatch):
    """The long path at any size: the layers below in blocks of a few rows, the traced layer's
    weights from its rows' statistics; every call of the one function recorded ``(h, n_q, n_k)``."""
    monkeypatch.setattr(pairs, "LONG_CELLS", 0)
    monkeypatch.setattr(attend_module, "BLOCK_CELLS", 96)  # blocks of a few rows: windows cross them
    calls: list[tuple[int, int, int]] = []
    one = attend_module.attend

    def recorded(q, k, *args, **kwargs):
        calls.append((q.shape[0], q.shape[1], k.shape[1]))
        return one(q, k, *args, **kwargs)

    monkeypatch.setattr(attend_module, "attend", recorded)
    return calls


@pytest.mark.parametrize("name", cases("decoder"))
def test_the_long_path_equals_transformers_eager_attention(name, tmp_path, long_path, monkeypatch):
    ref = build(tmp_path, name)
    model = load_model(tmp_path, device="cpu")
    ids = model.encode(PROMPT).ids
    n = len(ids)
    with torch.no_grad():
        theirs = ref(torch.tensor([ids]), output_attentions=True).attentions
    for layer in range(model.num_layers):
        trace = model.trace(PROMPT, layer)
        weights = trace["weights"]
        assert weights.store.long is not None
        mine = np.stack([weights.head(h) for h in range(model.num_heads)])[..., :n]  # a sink's column left out
        np.testing.assert_allclose(mine, theirs[layer][0].numpy(), atol=1e-5, rtol=0, err_msg=f"{name} L{layer}")
        # the structure drawn over the map: the model's own window and sinks, each row's weight on key 0
        drawn = long_structure(weights)
        window = trace.config["sliding_window"]
        assert drawn.window == (window if window is not None and window < n else None)
        np.testing.assert_allclose(drawn.first_key, theirs[layer][0][:, :, 0].numpy(), atol=1e-5, rtol=0)
        sinks = dict(ref.named_parameters()).get(f"model.layers.{layer}.self_attn.sinks")
        assert (drawn.sinks is None) == (sinks is None) and (drawn.sink_share is None) == (sinks is None)
        if sinks is not None:
            np.testing.assert_array_equal(drawn.sinks, sinks.detach().numpy())
            np.testing.assert_allclose(drawn.sink_share, 1 - theirs[layer][0].sum(-1).numpy(), atol=1e-5)
    # the layers below took the one function in blocks (or torch's fused kernel whole): never n × n
    assert all(h * n_q * n_k <= max(96, h * n) for h, n_q, n_k in long_path), (name, long_path)
    # pad keys and no mask: the same weights as the short path (held to transformers elsewhere)
    last = model.num_layers - 1
    long = [model.trace(PROMPT, last, mask=mask, pad_positions=(1, 3)) for mask in ("causal", "none")]
    monkeypatch.setattr(pairs, "LONG_CELLS", 1 << 27)
    short = [model.trace(PROMPT, last, mask=mask, pad_positions=(1, 3)) for mask in ("causal", "none")]
    for a, b in zip(long, short, strict=True):
        assert b["weights"].store.long is None
        np.testing.assert_allclose(a["weights"].array, b["weights"].array, atol=2e-6, rtol=0, err_msg=name)


def _long_llama(folder):
    """A random LLaMA whose positions reach 131,072 (2 heads sharing one key/value head), with a
    word-level tokenizer: one token per word (the one bench/bench_long_model.py measures)."""
    from bench.bench_long_model import random_llama

    random_llama(folder)
    words = [f"w{i}" for i in range(50)]
    g = torch.Generator().manual_seed(1)
    return " ".join(words[int(i)] for i in torch.randint(0, 50, (LONG,), generator=g))


class _Stop(Exception):
    pass


def _their_q_k(folder, ids, layer):
    """transformers' own q and k of ``layer`` (after the rotation), ``(h, n, d)`` and ``(kv, n, d)``:
    its layers below run (fused attention), the traced layer's input is caught before its attention."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    ref = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="sdpa").eval()
    attn = ref.model.layers[layer].self_attn
    got = {}

    def catch(_module, args, kwargs):
        got["x"], got["pe"] = kwargs.get("hidden_states", args[0] if args else None), kwargs["position_embeddings"]
        raise _Stop

    attn.register_forward_pre_hook(catch, with_kwargs=True)
    with torch.no_grad():
        with pytest.raises(_Stop):
            ref(torch.tensor([ids]))
        x, (cos, sin) = got["x"], got["pe"]
        d = attn.head_dim
        q = attn.q_proj(x).view(1, len(ids), -1, d).transpose(1, 2)
        k = attn.k_proj(x).view(1, len(ids), -1, d).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
    return q[0], k[0], attn.scaling


def _float64_rows(q, k, scale, head, r0, r1):
    """Rows r0:r1 of one head's causal weights, float64, from transformers' q and k."""
    g = head * k.shape[0] // q.shape[0]  # the key/value head this query head reads
    s = (q[head, r0:r1].double() @ k[g].double().T) * scale  # (r, n)
    i, j = torch.arange(r0, r1)[:, None], torch.arange(k.shape[1])[None, :]
    return torch.softmax(s.masked_fill(j > i, float("-inf")), dim=-1).numpy()


@pytest.fixture(scope="module")
def long_llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long-llama")
    return folder, _long_llama(folder)


def test_a_llama_beyond_16384_tokens_equals_a_float64_softmax_of_transformers_scores(long_llama):
    tmp_path, text = long_llama
    model = load_model(tmp_path, device="cpu")
    trace = model.trace(text, 1, max_tokens=131072)
    weights = trace["weights"]
    n = LONG
    assert weights.shape == (2, n, n) and weights.store.long is not None
    q, k, scale = _their_q_k(tmp_path, model.encode(text, 131072).ids, 1)
    np.testing.assert_allclose(trace["q_rotated"].array, q.numpy(), atol=2e-5, rtol=1e-4)  # the layer below agrees
    for head in range(2):
        for r0, r1 in ((0, 8), (n // 2 - 3, n // 2 + 5), (n - 8, n)):
            want = _float64_rows(q, k, scale, head, r0, r1)
            np.testing.assert_allclose(weights.rows(head, r0, r1), want, rtol=1e-4, atol=1e-8)
        want = _float64_rows(q, k, scale, head, n - 300, n - 44)
        tile = weights.store.region("weights", head, n - 300, n - 44, n - 700, n - 444)  # a zoomed tile
        np.testing.assert_allclose(tile, want[:, n - 700 : n - 444], rtol=1e-4, atol=1e-8)
        for i, j in ((n - 1, 0), (n - 1, n - 1), (12345, 6789)):
            cell = weights.cell(head, i, j)
            assert cell == pytest.approx(float(_float64_rows(q, k, scale, head, i, i + 1)[0, j]), rel=1e-4, abs=1e-9)


def test_131072_tokens_of_a_decoder_fit_a_laptop(long_llama):
    # The estimate counted three n × n boolean masks (48 GiB at 131,072 tokens) and refused.
    from models.memory import estimate_pretrained_peak

    arch = load_model(long_llama[0], device="cpu").arch
    assert estimate_pretrained_peak(arch, 131072, 1) < 2 << 30  # measured: 0.6 GiB (bench_long.py --model)
    assert estimate_pretrained_peak(arch, 8, 1) < 1 << 30


def test_export_of_a_region_of_a_long_decoder_input_from_the_command_line(long_llama, tmp_path, capsys):
    from main import main

    folder, text = long_llama
    (tmp_path / "long.txt").write_text(text, encoding="utf-8")
    code = main(["export", "--model", str(folder), "--text-file", str(tmp_path / "long.txt"), "--layer", "1",
                 "--stages", "weights", "--rows", f"{LONG - 10}:{LONG}", "--cols", "0:64", "--out", str(tmp_path / "x"),
                 "--device", "cpu"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    got = np.load(tmp_path / "x" / "weights.npy")  # (heads, 10, 64)
    weights = load_model(folder, device="cpu").trace(text, 1, max_tokens=LONG)["weights"]
    assert got.shape == (2, 10, 64)
    for head in range(2):
        # the same weights (rows' statistics over other blocks of rows: float32 matmuls of other shapes)
        np.testing.assert_allclose(got[head], weights.rows(head, LONG - 10, LONG)[:, :64], rtol=1e-5, atol=0)
