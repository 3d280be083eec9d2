"""The atlas' head metrics and the detectors' scores in torch, on the device that holds the weights.

The formulas are :mod:`models.reads.survey`'s (``head_metrics`` without ``keep``) and
:mod:`models.reads.detectors`' (``scores_on``), written once more for tensors so that a batch's weights
``(b, h, n, n)`` never leave the device: each batch's metrics are written into a block's tensor on the
device, and the block crosses to the host once (:func:`models.engine.host.to_numpy`), not once per
head or per batch (issue 45: every read runs where the numbers are). Float64 as the numpy code, so the
two agree to float64's rounding (tests/models/test_atlas_device.py).
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.reads.survey import METRIC_NAMES

SLICE_ELEMENTS = 1 << 21  # float64 temporaries of at most ~16 MB each: a batch is read in slices of heads


def metrics_tensor(a: Tensor) -> Tensor:
    """Every metric of ``a (..., n_q, n_k)`` as one float64 tensor ``(len(METRIC_NAMES), ...)`` on
    ``a``'s device, in the order of ``METRIC_NAMES`` (survey's ``head_metrics``, all tokens)."""
    lead, (n_q, n_k) = a.shape[:-2], a.shape[-2:]
    flat = a.reshape(-1, n_q, n_k)
    out = torch.empty(len(METRIC_NAMES), flat.shape[0], dtype=torch.float64, device=a.device)
    step = max(1, SLICE_ELEMENTS // max(1, n_q * n_k))
    for start in range(0, flat.shape[0], step):
        out[:, start : start + step] = _metrics_slice(flat[start : start + step].double())
    return out.reshape(len(METRIC_NAMES), *lead)


def _metrics_slice(a: Tensor) -> Tensor:  # (m, n_q, n_k) float64 -> (metrics, m)
    n_q, n_k = a.shape[-2:]
    nan = torch.full(a.shape[:1], float("nan"), dtype=a.dtype, device=a.device)
    if n_q == 0 or n_k == 0:
        return nan.expand(len(METRIC_NAMES), -1).clone()
    # 0 ln 0 = 0; a negative weight (never a softmax's) gives NaN, as numpy's
    plogp = torch.where(a > 0, a * torch.log(torch.where(a > 0, a, 1.0)), torch.where(a == 0, 0.0, float("nan")))
    out = {
        "entropy": -plogp.sum(-1).mean(-1),
        "max_weight": a.amax(-1).mean(-1),
        "first": a[:, :, 0].mean(-1),
        "sink": a[:, 1:, 0].mean(-1) if n_q == n_k and n_q > 1 else a[:, :, 0].mean(-1) if n_q != n_k else nan,
    }
    if n_q == n_k:
        i = torch.arange(n_q, device=a.device)
        distance = (i[:, None] - i[None, :]).abs().to(a.dtype)
        out["self"] = torch.diagonal(a, dim1=-2, dim2=-1).mean(-1)
        out["previous"] = torch.diagonal(a, offset=-1, dim1=-2, dim2=-1).mean(-1) if n_q > 1 else nan
        out["distance"] = (a * distance).sum(-1).mean(-1)
    else:
        out["self"] = out["previous"] = out["distance"] = nan
    return torch.stack([out[name] for name in METRIC_NAMES])


# --- the detectors ----------------------------------------------------------------------------------


def detector_scores(kind: str, a: Tensor, probe, patterns: dict) -> dict[str, Tensor]:
    """:func:`models.reads.detectors.scores_on` for tensors: every detector reading a probe of
    ``kind`` on ``a (h, n, n)``, each ``(h,)`` float64 on ``a``'s device. ``patterns``: the probe's
    0/1 patterns by detector, as numpy (moved to the device here)."""
    a = a.double()
    out = {}
    for name, pattern in patterns.items():
        p = torch.as_tensor(pattern, dtype=torch.float64, device=a.device)
        out[name] = (a * p).sum((-2, -1)) / a.sum((-2, -1))
    if kind in ("repeats", "induction"):
        out["sink"] = a[..., :, 0].mean(-1)
    if kind == "retrieval":
        hits = [(a[..., q, :].argmax(-1) == t).double() for q, t in probe.copies]
        out["retrieval"] = torch.stack(hits).mean(0)
    return out
