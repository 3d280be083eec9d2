"""The one attention function (models/engine/attend.py) against references no one here wrote:
torch's ``scaled_dot_product_attention`` (masks, grouped kv heads, scale) and plain float64
formulas for what it cannot express (soft-cap, sinks, bands, temperature)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from models.engine.attend import Variant, after_scores, attend

H, KV, N, D = 4, 2, 12, 8


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(H, N, D, generator=g)
    k = torch.randn(KV, N, D, generator=g)
    v = torch.randn(KV, N, D, generator=g)
    return q, k, v


def reference(q, k, v, *, scale, causal=False, window=None, band=None, softcap=None, sinks=None,
              temperature=1.0, q0=0, k0=0):  # fmt: skip
    """Every step in float64, written from the definitions."""
    q, k, v = (t.double() for t in (q, k, v))
    rep = q.shape[0] // k.shape[0]
    k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
    s = q @ k.transpose(-1, -2) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(q0, q0 + q.shape[1])[:, None]
    j = torch.arange(k0, k0 + k.shape[1])[None, :]
    hidden = torch.zeros(q.shape[1], k.shape[1], dtype=torch.bool)
    if causal:
        hidden |= j > i
    if window is not None:
        hidden |= i - j >= window
    if band is not None:
        hidden |= (i - j).abs() > band
    s = s.masked_fill(hidden, -math.inf)
    if sinks is not None:
        s = torch.cat([s, sinks.double().view(-1, 1, 1).expand(s.shape[0], s.shape[1], 1)], -1)
    a = torch.softmax(s / temperature, -1)
    return a[..., : k.shape[1]] @ v, a, torch.logsumexp(s / temperature, -1)


def test_equals_scaled_dot_product_attention_with_groups_and_causal_mask(qkv):
    q, k, v = qkv
    for causal in (False, True):
        out, a = attend(q, k, v, Variant(scale=D**-0.5, causal=causal))
        ref = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal, enable_gqa=True)[0]
        torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)
        fused, none = attend(q, k, v, Variant(scale=D**-0.5, causal=causal), weights=False)
        assert none is None
        torch.testing.assert_close(fused, ref, atol=1e-6, rtol=1e-5)
        assert a.shape == (H, N, N)


@pytest.mark.parametrize("kw", [dict(window=3), dict(band=2), dict(softcap=1.5), dict(temperature=0.5),
                                dict(sinks=torch.tensor([0.5, 2.0, -1.0, 3.0]))])  # fmt: skip
def test_each_variant_equals_its_definition(qkv, kw):
    q, k, v = qkv
    causal = "band" not in kw
    out, a = attend(q, k, v, Variant(scale=0.3, causal=causal, **kw))
    ref_out, ref_a, _ = reference(q, k, v, scale=0.3, causal=causal, **kw)
    torch.testing.assert_close(out.double(), ref_out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(a.double(), ref_a, atol=1e-6, rtol=1e-5)


def test_rows_at_their_positions_equal_the_whole_matrix(qkv):
    """The new rows of a KV cache (queries at positions 8.. against keys 0..) are the whole
    sequence's last rows: causality and bands come from positions, not from a square matrix."""
    q, k, v = qkv
    variant = Variant(scale=0.3, causal=True, window=5, sinks=torch.tensor([0.1, 0.2, 0.3, 0.4]))
    whole, a_whole = attend(q, k, v, variant)
    tail, a_tail = attend(q[:, 8:], k, v, variant, q0=8)
    torch.testing.assert_close(tail, whole[:, 8:])
    torch.testing.assert_close(a_tail, a_whole[:, 8:])


def test_every_stage_is_recorded_and_after_scores_stops_where_asked(qkv):
    q, k, v = qkv
    bias = torch.randn(H, N, N)
    variant = Variant(scale=0.3, causal=True, softcap=2.0)
    rec = {}
    attend(q, k, v, variant, bias=bias, record=rec)
    assert set(rec) == {"scores", "scaled", "biased", "softcapped", "masked", "weights", "head_output"}
    for stage in ("scaled", "biased", "softcapped", "masked", "weights"):
        torch.testing.assert_close(after_scores(rec["scores"], variant, bias=bias, upto=stage), rec[stage])
    assert torch.isinf(rec["masked"][0, 0, 1]) and rec["weights"][0, 0, 1] == 0


def test_a_row_with_every_key_hidden_gives_zeros_not_nan(qkv):
    q, k, v = qkv
    hidden = torch.zeros(N, N, dtype=torch.bool)
    hidden[3] = True
    for weights in (True, False):
        out, _ = attend(q, k, v, Variant(scale=0.3), hidden=hidden, weights=weights)
        assert torch.isfinite(out).all() and (out[:, 3] == 0).all()


@pytest.mark.parametrize("kind", [dict(causal=True), dict(causal=True, window=4), dict(band=3), dict(window=6)])
def test_the_variant_builds_no_mask_where_it_hides_nothing_and_the_same_mask_elsewhere(kind):
    """A generated token over its cache hides nothing: ``hidden`` is None there (no n-wide mask per
    step); wherever a key is hidden, the mask equals the positions' definition."""
    variant = Variant(**kind)
    for q0, n_q, k0, n_k in [(9, 1, 0, 10), (9, 1, 6, 4), (3, 1, 0, 10), (0, 10, 0, 10), (5, 3, 2, 6), (20, 2, 0, 22)]:
        i = torch.arange(q0, q0 + n_q)[:, None]
        j = torch.arange(k0, k0 + n_k)[None, :]
        expected = torch.zeros(n_q, n_k, dtype=torch.bool)
        if kind.get("causal"):
            expected |= j > i
        if "window" in kind:
            expected |= i - j >= kind["window"]
        if "band" in kind:
            expected |= (i - j).abs() > kind["band"]
        got = variant.hidden(q0, n_q, k0, n_k, torch.device("cpu"))
        if expected.any():
            assert torch.equal(got, expected), (kind, q0, n_q, k0, n_k)
        else:
            assert got is None, (kind, q0, n_q, k0, n_k)
