"""One function moves a tensor to numpy (models/engine/host.py), whatever its device (issue 45): at
16,384 tokens reading Q, K or V of a trace on CUDA raised ``TypeError: can't convert cuda:0 device
type tensor to numpy``. Device-dependent tests run on the CPU and on CUDA when present (the
``device`` fixture, tests/models/conftest.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from models.config import AttentionConfig, AttentionRequest
from models.engine import pairs
from models.engine.host import to_numpy
from models.engine.pipeline import run
from models.reads.params import toy_params

MODELS = Path(__file__).resolve().parents[2] / "models"
HOST = MODELS / "engine" / "host.py"
CROSSING = re.compile(r"\.(numpy|cpu)\(\)")


def test_nothing_in_models_crosses_to_the_host_but_the_one_function():
    found = [f"{path.relative_to(MODELS.parent)}:{i}: {line.strip()}"
             for path in sorted(MODELS.rglob("*.py")) if path != HOST
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if CROSSING.search(line)]  # fmt: skip
    assert found == [], "use models.engine.host.to_numpy:\n" + "\n".join(found)
    assert CROSSING.search(HOST.read_text(encoding="utf-8"))  # the one place (the test sees it)


def test_to_numpy_reads_bfloat16_and_tensors_that_need_grad(device):
    x = torch.tensor([[1.0, -2.5], [0.1, 3e38]], device=device)
    bf16 = x.to(torch.bfloat16)
    got = to_numpy(bf16)  # numpy has no bfloat16: float32, the same values
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, bf16.float().cpu().numpy())
    w = torch.ones(3, device=device, requires_grad=True) * 2
    np.testing.assert_array_equal(to_numpy(w), [2.0, 2.0, 2.0])
    assert to_numpy(x, torch.float64).dtype == np.float64
    assert to_numpy(torch.arange(4, device=device)).dtype == np.int64


def test_a_cpu_tensor_is_not_copied():
    x = torch.arange(6.0)
    a = to_numpy(x)
    x[0] = 7.0
    assert a[0] == 7.0  # the same memory: no copy on the way to the host when none is needed


def test_q_k_v_of_a_long_input_are_read_on_the_traces_device(device):
    """The long input's Q, K and V (projected head by head when first read, on the trace's device)
    are the projections of its input by the layer's weights (numpy, float64)."""
    n = 16384
    assert n * n > pairs.LONG_CELLS  # the long path: no n×n stage is ever held
    cfg = AttentionConfig(heads=2, d_model=8, seed=1, device=device, mask="causal", max_tokens=n)
    req = AttentionRequest(config=cfg, sentence=" ".join(f"w{i}" for i in range(n)))
    trace = run(req)
    assert trace.device.startswith(device)
    p = toy_params(req)
    x = np.asarray(trace["input"].array, np.float64)  # (n, d)
    for name, w in (("q", p.W_q), ("k", p.W_k), ("v", p.W_v)):
        got = trace[name].array
        assert isinstance(got, np.ndarray) and got.shape == (2, n, w.shape[-1])
        np.testing.assert_allclose(got, np.einsum("nd,hde->hne", x, w), atol=1e-5, rtol=1e-5, err_msg=name)
