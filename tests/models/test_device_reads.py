"""Every read on the device that holds the numbers (issue 45): a long overview and a stage read in blocks
are reduced where the trace is, and only the picture crosses to the host (models.engine.host.to_numpy,
counted at each module's boundary); the one peak reduction (models.engine.pixels.block_max) is the same
for numpy arrays and tensors. Run on the CPU and on CUDA when present (the ``device`` fixture)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.engine import host, long_rows, pair_outputs, pairs, reduce
from models.engine.attend import Variant
from models.engine.masks import MaskSpec
from models.engine.pixels import block_max
from models.engine.reduce import reduce_head
from models.engine.trace import Stage


def _store(n: int, device: str, mask: MaskSpec | None = None, h: int = 2, d: int = 8) -> pairs.PairStore:
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(h, n, d, generator=g).to(device) * 2 for _ in range(3))
    variant = Variant(scale=d**0.5, divide=True).with_mask(mask or MaskSpec(causal=True))
    spec = pairs.PairSpec(q=q, k=k, v=v, head_groups=tuple(range(h)), variant=variant)
    return pairs.PairStore(spec)


@pytest.fixture
def copies(monkeypatch) -> list[tuple[int, ...]]:
    """The shape of every tensor the engine's reads hand to the host."""
    seen: list[tuple[int, ...]] = []

    def counted(t, dtype=None):
        seen.append(tuple(t.shape))
        return host.to_numpy(t, dtype)

    for module in (long_rows, pairs, pair_outputs, reduce):
        if hasattr(module, "to_numpy"):
            monkeypatch.setattr(module, "to_numpy", counted)
    return seen


def _weights_reference(store: pairs.PairStore, head: int, r0: int, r1: int) -> torch.Tensor:
    """Rows r0:r1 of one head's causal weights, float64, by the definition."""
    s = store.spec
    q, k = s.q[head, r0:r1].double(), s.k[head].double()
    x = (q @ k.T) / s.scale[1]
    x = x.masked_fill(s.mask.rows(r0, r1, k.shape[0], x.device), float("-inf"))
    return torch.softmax(x, dim=-1)


def test_a_long_overview_crosses_to_the_host_once_per_delivered_block(device, copies):
    """16,384 tokens, one head onto 1024 × 1024 pixels: one copy to the host per band of pixel rows handed
    to the screen, none per tile of keys (the scores, statistics and peaks stay on the device), and
    the picture is the float64 softmax's block maxima."""
    n = 16384
    store = _store(n, device)
    assert store.long is not None  # the streamed path
    stage = Stage("weights", "", "", "", store=store)
    delivered: list[int] = []
    got = reduce_head(stage, 0, 1024, signed=False, on_rows=lambda rows, peak: delivered.append(rows))
    bands = math.ceil(n / long_rows.TILE_ROWS)
    keys = long_rows.TILE_KEYS * (long_rows.GPU_KEYS if device == "cuda" else 1)
    tiles = sum(math.ceil(min(n, (b + 1) * long_rows.TILE_ROWS) / keys) for b in range(bands))
    assert len(delivered) == bands and delivered[-1] == 1024
    assert tiles > 4 * bands  # a band's keys come in several tiles: none of them crossed
    assert len(copies) == len(delivered), copies[:5]
    assert all(shape[0] <= long_rows.TILE_ROWS // 16 + 1 and shape[1] == 1024 for shape in copies)
    for p in (0, 511, 1023):  # pixel rows of 16 × 16 cells: the largest weight of each block
        want = block_max(_weights_reference(store, 0, 16 * p, 16 * p + 16), 16, 16)[0]
        np.testing.assert_allclose(got.peak[p], host.to_numpy(want), rtol=1e-5, atol=1e-7, err_msg=str(p))


@pytest.mark.parametrize("name", ["masked", "weights"])
def test_a_stage_in_blocks_is_reduced_where_it_is(device, copies, name):
    """4,096 tokens (blocks of rows, not the long path) onto 256 px: the picture (and for the masked
    stage the share of hidden cells) crosses to the host once for the head, not a copy of every block of
    rows and of each band's extremes (4 blocks of 1,024 × 4,096 cells and 5 copies each, before)."""
    n = 4096
    store = _store(n, device, MaskSpec(window=700))
    assert store.long is None and store.blocks == 4
    got = reduce_head(Stage(name, "", "", "", store=store), 1, 256, signed=name == "masked")
    assert len(copies) == (2 if name == "masked" else 1), copies
    assert all(shape == (256, 256) for shape in copies)
    for p in (0, 100, 255):
        blocks = store.rows(name, 1, 16 * p, 16 * p + 16).reshape(16, 256, 16)  # (rows, pixel, columns)
        hi = blocks.max(axis=(0, 2))
        want = hi
        if name == "masked":  # the visible value of largest magnitude; −∞ where the whole block is hidden
            lo = np.where(np.isneginf(blocks), np.inf, blocks).min(axis=(0, 2))
            want = np.where(np.isneginf(hi), hi, np.where(np.abs(lo) > np.abs(hi), lo, hi))
        np.testing.assert_allclose(got.peak[p], want, rtol=1e-6, atol=0)


def test_the_head_outputs_read_the_weights_where_they_are(device, copies):
    """O = A V from the store's blocks of weights, on the trace's device, without a copy to the host,
    equal to the float64 definition."""
    store = _store(600, device)
    out = store.head_output()
    assert out.device.type == device and copies == []
    a = _weights_reference(store, 1, 0, 600)
    np.testing.assert_allclose(host.to_numpy(out[1]), host.to_numpy(a @ store.spec.v[1].double()), atol=2e-5)


@pytest.mark.parametrize("seed", range(40))
def test_block_max_is_one_rule_for_numpy_and_tensors(seed, device):
    """The one peak reduction: numpy and torch (on the device) give the padded reference's block maxima,
    for any block size (short and long rows of columns), partial blocks at either end, NaN spreading."""
    rng = np.random.default_rng(seed)
    r, c = (int(x) for x in rng.integers(1, 300, 2))
    kr, kc = int(rng.integers(1, 9)), int(rng.choice([1, 3, 16, 63, 64, 130]))
    lead = (int(rng.integers(0, kr)), int(rng.integers(0, kc)))
    x = rng.standard_normal((2, r, c)).astype(np.float32)
    if seed % 3 == 0:
        x[1, r // 2, c // 3] = np.nan
    rows, cols = -(-(lead[0] + r) // kr), -(-(lead[1] + c) // kc)
    padded = np.full((2, rows * kr, cols * kc), -np.inf, np.float32)
    padded[:, lead[0] : lead[0] + r, lead[1] : lead[1] + c] = x
    want = padded.reshape(2, rows, kr, cols, kc).max(axis=(2, 4))
    np.testing.assert_array_equal(block_max(x, kr, kc, lead), want)
    got = block_max(torch.from_numpy(x).to(device), kr, kc, lead)
    assert got.device.type == device
    np.testing.assert_array_equal(host.to_numpy(got), want)
