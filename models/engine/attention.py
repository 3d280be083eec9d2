"""The maths of attention, one small pure function per stage (torch tensors in, tensors out).

Conventions follow the study notes: a row is a token, weights multiply from the right
(``Q = X W_Q``), per-head tensors carry the head axis first: ``(h, n, d)``.
"""

from __future__ import annotations

import math

import torch

# Additive scores materialise (h, rows, n_k, d_k); rows are processed in chunks of at most
# this many elements so that long sentences do not exhaust memory.
_ADDITIVE_CHUNK_ELEMENTS = 1 << 24


def sinusoidal_encoding(n: int, d: int) -> torch.Tensor:
    """``p[i, 2j] = sin(i / 10000^(2j/d))``, ``p[i, 2j+1] = cos(i / 10000^(2j/d))``; odd ``d`` works.

    Computed in float64 so that float32 results are correctly rounded for long sequences.
    """
    pos = torch.arange(n, dtype=torch.float64)[:, None]  # (n, 1)
    two_j = torch.arange(0, d, 2, dtype=torch.float64)  # (ceil(d/2),)
    angle = pos / torch.pow(10000.0, two_j / d)  # (n, ceil(d/2))
    p = torch.empty(n, d, dtype=torch.float64)
    p[:, 0::2] = torch.sin(angle)
    p[:, 1::2] = torch.cos(angle[:, : d // 2])
    return p  # (n, d)


def project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """Per-head projection ``X W_i + b_i``: x (n, d_model), w (h, d_model, d) -> (h, n, d)."""
    out = torch.matmul(x, w)  # (h, n, d)
    return out if b is None else out + b[:, None, :]


def dot_scores(q: torch.Tensor, k: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``S = Q Kᵀ``: (h, n_q, d_k) x (h, n_k, d_k) -> (h, n_q, n_k) (into ``out`` when given)."""
    return torch.matmul(q, k.transpose(-1, -2), out=out)


def general_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Bilinear ``S = Q W Kᵀ`` with w (h, d_k, d_k) -> (h, n_q, n_k)."""
    return torch.matmul(torch.matmul(q, w), k.transpose(-1, -2))


def additive_scores(
    q: torch.Tensor, k: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """Bahdanau ``s_ij = vᵀ tanh(q_i W_1 + k_j W_2)``.

    q (h, n_q, d_k), k (h, n_k, d_k), w1/w2 (h, d_k, d_a), v (h, d_a) -> (h, n_q, n_k).
    """
    qa = torch.matmul(q, w1)  # (h, n_q, d_a)
    ka = torch.matmul(k, w2)  # (h, n_k, d_a)
    h, n_q, d_a = qa.shape
    n_k = ka.shape[1]
    rows = max(1, _ADDITIVE_CHUNK_ELEMENTS // max(1, h * n_k * d_a))
    out = torch.empty(h, n_q, n_k, dtype=q.dtype, device=q.device)
    for start in range(0, n_q, rows):
        stop = min(n_q, start + rows)
        t = torch.tanh(qa[:, start:stop, None, :] + ka[:, None, :, :])  # (h, r, n_k, d_a)
        out[:, start:stop] = torch.matmul(t, v[:, None, :, None])[..., 0]  # (h, r, n_k)
    return out


def scale(scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """``S / √d_k``, so that large d_k does not push softmax into one-hot rows."""
    return scores / math.sqrt(d_k)


def apply_mask(scores: torch.Tensor, hidden: torch.Tensor | None) -> torch.Tensor:
    """Set hidden scores to -inf (the notes' ``-1e999``): their weights become exactly 0."""
    if hidden is None:
        return scores
    return scores.masked_fill(hidden, float("-inf"))  # (h, n_q, n_k)


def temper(z: torch.Tensor, temperature: float) -> torch.Tensor:
    """``z / T`` for scores less their row maximum (``z ≤ 0``, exactly 0 at the maximum): the
    maximum is subtracted *before* dividing, and 0 / T stays 0 even when T underflows float32."""
    return z if temperature == 1.0 else torch.where(z == 0, z, z / temperature)


def softmax(scores: torch.Tensor, temperature: float = 1.0, eager: bool = False) -> torch.Tensor:
    """Row-wise, numerically stable softmax of ``scores / T``, exact for any finite scores and
    any positive temperature: the row maximum is subtracted *before* dividing by T, so a tiny T
    cannot overflow (the largest score becomes 0, the others −large, never inf − inf).

    A row whose keys are all hidden (all -inf) gives zero weights, never NaN. ``eager``: the caller
    never runs under ``torch.func.vmap``, so the pass that zeroes such rows runs only when one is
    there (a whole pass over the weights: ~6 ms a head at 2,048 tokens).
    """
    row_max = scores.amax(dim=-1, keepdim=True)  # (h, n_q, 1)
    dead = torch.isneginf(row_max)  # every key hidden
    if temperature != 1.0:
        x = temper(scores - torch.where(dead, torch.zeros_like(row_max), row_max), temperature)  # ≤ 0
    else:
        x = scores
    a = torch.softmax(x, dim=-1)  # subtracts the row max itself; an all −∞ row gives NaN ...
    if eager and not bool(dead.any()):
        return a
    return a.masked_fill_(dead, 0.0)  # ... which becomes 0 here (not eager: torch.func.vmap batches
    # texts of one length through here, and a batched tensor cannot steer Python's control flow)


def weighted_sum(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Per-head output ``O_i = A_i V_i``: (h, n_q, n_k) x (h, n_k, d_v) -> (h, n_q, d_v)."""
    return torch.matmul(weights, v)


def concat_heads(o: torch.Tensor) -> torch.Tensor:
    """(h, n_q, d_v) -> (n_q, h·d_v), heads side by side along the features."""
    h, n, d_v = o.shape
    return o.permute(1, 0, 2).reshape(n, h * d_v)


def output_projection(c: torch.Tensor, w_o: torch.Tensor, b_o: torch.Tensor | None) -> torch.Tensor:
    """``Y = concat W_O + b_O``: (n_q, h·d_v) x (h·d_v, d_out) -> (n_q, d_out)."""
    y = c @ w_o
    return y if b_o is None else y + b_o


def value_norms(v: torch.Tensor, w_o: torch.Tensor, head_groups, rows: int = 4096) -> torch.Tensor:
    """``‖f_h(x_j)‖`` (h, n_k): the length of what key j would add to the output through query head
    h if the head attended to it alone, ``f_h(x_j) = v_g(h),j W_O^h`` with ``v = x W_V + b_V``
    (already in ``v`` (kv, n_k, d_v)) and ``W_O^h`` the d_v rows of ``w_o (h·d_v, d_out)`` head h
    feeds (Kobayashi et al., 2020). Summed in float64, one head and block of keys at a time."""
    kv, n_k, d_v = v.shape  # (kv, n_k, d_v)
    h = len(head_groups)
    assert w_o.shape[0] == h * d_v, (w_o.shape, h, d_v)
    out = torch.empty(h, n_k, dtype=v.dtype, device=v.device)
    for head, g in enumerate(head_groups):
        w = w_o[head * d_v : (head + 1) * d_v].to(torch.float64)  # (d_v, d_out): W_O^h
        for start in range(0, n_k, rows):
            f = v[g, start : start + rows].to(torch.float64) @ w  # (r, d_out): f_h(x_j)
            out[head, start : start + rows] = torch.linalg.vector_norm(f, dim=-1).to(v.dtype)
    return out


def weighted_norms(weights: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """``‖a_ij f_h(x_j)‖ = a_ij ‖f_h(x_j)‖`` (a ≥ 0): (h, n_q, n_k) x (h, n_k) -> (h, n_q, n_k)."""
    return weights * norms[:, None, :]
