"""Reference implementations shared by the engine tests: torch.nn.MultiheadAttention in our
weight convention, and a float64 numpy re-computation of every stage."""

from __future__ import annotations

import numpy as np
import torch

from models.config import AttentionWeights


def causal_mask(n_q: int, n_k: int) -> torch.Tensor:
    """The notes' causal mask, whole: True where query i must not see key j (j > i), (n_q, n_k) bool."""
    return torch.ones(n_q, n_k, dtype=torch.bool).triu(diagonal=1)


def padding_mask(n_q: int, n_k: int, positions) -> torch.Tensor:
    """True on every row for the hidden key positions: (n_q, n_k) bool."""
    hidden = torch.zeros(n_k, dtype=torch.bool)
    hidden[list(positions)] = True
    return hidden.expand(n_q, n_k)


def make_mha(d_model: int, heads: int, seed: int) -> torch.nn.MultiheadAttention:
    """A seeded ``nn.MultiheadAttention`` with non-zero biases (PyTorch initialises them to 0)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mha = torch.nn.MultiheadAttention(embed_dim=d_model, num_heads=heads, bias=True, batch_first=True)
        with torch.no_grad():
            mha.in_proj_bias.uniform_(-0.5, 0.5)
            mha.out_proj.bias.uniform_(-0.5, 0.5)
    return mha.eval()


def mha_to_weights(mha: torch.nn.MultiheadAttention) -> AttentionWeights:
    """Our convention: ``Q = X W_q`` with ``W_q[i] = in_proj_weight[:E].T[:, i*dk:(i+1)*dk]``."""
    e, h = mha.embed_dim, mha.num_heads
    dk = e // h
    w_in = mha.in_proj_weight.detach().numpy()  # (3E, E), PyTorch computes x @ W.T
    b_in = mha.in_proj_bias.detach().numpy()  # (3E,)

    def heads_of(part: int) -> tuple[np.ndarray, np.ndarray]:
        wt = w_in[part * e : (part + 1) * e].T  # (E, E): columns are output features
        b = b_in[part * e : (part + 1) * e]
        w = np.stack([wt[:, i * dk : (i + 1) * dk] for i in range(h)])  # (h, E, dk)
        return w.copy(), np.stack([b[i * dk : (i + 1) * dk] for i in range(h)])

    (w_q, b_q), (w_k, b_k), (w_v, b_v) = heads_of(0), heads_of(1), heads_of(2)
    return AttentionWeights(
        W_q=w_q, W_k=w_k, W_v=w_v, W_o=mha.out_proj.weight.detach().numpy().T.copy(),
        b_q=b_q, b_k=b_k, b_v=b_v, b_o=mha.out_proj.bias.detach().numpy().copy(),
    )  # fmt: skip


def run_mha(
    mha: torch.nn.MultiheadAttention,
    x_q: np.ndarray,
    x_k: np.ndarray,
    causal: bool,
    average: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """``(output (n_q, E), weights)``: weights ``(n_q, n_k)`` averaged or ``(h, n_q, n_k)``."""
    q = torch.from_numpy(x_q)[None]
    kv = torch.from_numpy(x_k)[None]
    mask = torch.ones(len(x_q), len(x_k), dtype=torch.bool).triu(1) if causal else None  # True = not allowed
    with torch.no_grad():
        out, weights = mha(q, kv, kv, attn_mask=mask, need_weights=True, average_attn_weights=average)
    return out[0].numpy(), weights[0].numpy()


def softmax_rows(s: np.ndarray) -> np.ndarray:
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def reference_output(
    x_q: np.ndarray, x_k: np.ndarray, w: AttentionWeights, scale: bool = True, temperature: float = 1.0
) -> dict[str, np.ndarray]:
    """Float64 numpy multi-head attention (no mask) following the notes' formulas."""
    f = lambda a: None if a is None else np.asarray(a, dtype=np.float64)
    xq, xk = f(x_q), f(x_k)
    q = np.einsum("nd,hde->hne", xq, f(w.W_q))
    k = np.einsum("nd,hde->hne", xk, f(w.W_k))
    v = np.einsum("nd,hde->hne", xk, f(w.W_v))
    if w.b_q is not None:
        q, k, v = q + f(w.b_q)[:, None], k + f(w.b_k)[:, None], v + f(w.b_v)[:, None]
    s = q @ k.transpose(0, 2, 1)
    if scale:
        s = s / np.sqrt(q.shape[-1])
    a = softmax_rows(s / temperature)
    o = a @ v
    c = np.concatenate(list(o), axis=1)
    y = c @ f(w.W_o)
    if w.b_o is not None:
        y = y + f(w.b_o)
    return {"q": q, "k": k, "v": v, "weights": a, "head_output": o, "concat": c, "output": y}
