"""The lazy n×n stages with a learned sink column and a two-sided local window, block by block,
against the whole computation written out with torch (many small row blocks: every block edge)."""

import pytest
import torch

from models.engine import pairs
from models.engine.attend import Variant


def reference(q, k, v, scale, hidden, sinks):
    s = q @ k.transpose(-1, -2)  # (h, n, n)
    x = (s * scale).masked_fill(hidden, float("-inf"))
    if sinks is not None:
        x = torch.cat([x, sinks.view(-1, 1, 1).expand(x.shape[0], x.shape[1], 1)], dim=-1)
    a = torch.softmax(x, dim=-1)
    return x, a, a[..., : k.shape[1]] @ v


@pytest.mark.parametrize("kind", ["band", "sinks-causal-window", "sinks-band"])
def test_blocks_match_the_whole(monkeypatch, kind):
    monkeypatch.setattr(pairs, "BLOCK_BYTES", 4 * 40 * 8)  # 8 rows per block at n = 40
    torch.manual_seed(0)
    h, n, d = 3, 37, 8
    q, k, v = torch.randn(h, n, d), torch.randn(h, n, d), torch.randn(h, n, d)
    sinks = torch.randn(h) * 2 if kind.startswith("sinks") else None
    i = torch.arange(n)
    if "band" in kind:
        mask = pairs.MaskSpec(band=3)
        hidden = (i[:, None] - i[None, :]).abs() > 3
    else:
        mask = pairs.MaskSpec(causal=True, window=5)
        hidden = (i[None, :] > i[:, None]) | (i[None, :] <= i[:, None] - 5)
    variant = Variant(scale=0.3, sinks=sinks).with_mask(mask)
    spec = pairs.PairSpec(q=q, k=k, v=v, head_groups=(0, 1, 2), variant=variant)
    store = pairs.PairStore(spec)
    assert store.blocks > 3 and store.n_k == n + (sinks is not None)
    masked, weights, out = reference(q, k, v, 0.3, hidden, sinks)
    torch.testing.assert_close(torch.from_numpy(store.full("masked")), masked)
    torch.testing.assert_close(torch.from_numpy(store.full("weights")), weights)
    torch.testing.assert_close(store.head_output(), out, rtol=1e-5, atol=1e-6)
    tight = pairs.PairStore(spec, budget=0)  # past the budget: only the visible keys of each block
    torch.testing.assert_close(tight.head_output(), out, rtol=1e-5, atol=1e-6)
    if sinks is not None:  # the sink column of the scores is the logit itself, in every row
        scores = store.full("scores")
        assert (scores[:, :, -1] == sinks.view(-1, 1).numpy()).all()
        assert store.rows("weights", 1, 10, 11).shape == (1, n + 1)
