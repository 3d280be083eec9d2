"""Shared pieces of the pretrained-model engine: errors, weights access, masks and attention.

Every architecture (BERT, GPT-2, LLaMA) runs its layers through :func:`attention` below, and the
trace of layer L records the intermediate tensors of that very same function. So what the viewer
shows is exactly what the forward pass computed, not a re-implementation beside it.

Conventions: one sentence at a time (no batch axis), float32, right-multiplication
(``Q = X W_q + b_q`` with ``W_q`` of shape ``(d_model, h*d_k)``) like models/config.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from models import attention as att
from models.config import InputError

MASK_MODES = ("none", "causal", "padding")


# --- small numerical helpers -------------------------------------------------------------------


def _gelu_tanh(x: Tensor) -> Tensor:
    # OpenAI GPT-2's gelu ("gelu_new"); written exactly as transformers does to match bit-for-bit.
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
    return 0.5 * x * (1.0 + torch.tanh(inner))


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_fast": _gelu_tanh,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


def activation(name: str) -> Callable[[Tensor], Tensor]:
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise InputError(
            f"unsupported activation {name!r} in config.json; supported: {', '.join(ACTIVATIONS)}"
        )
    return ACTIVATIONS[name]


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """LLaMA's RMSNorm: scale by 1/rms(x), no centring, no bias."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """``x @ w + b`` with ``w`` of shape (in, out)."""
    return x @ w if b is None else torch.addmm(b, x, w)


# --- weights -----------------------------------------------------------------------------------


class Weights:
    """The tensors of one checkpoint, handed out as float32 on ``device`` when taken.

    Only what an architecture takes is converted and kept, so unused buffers (GPT-2's stored
    causal masks, heads) cost nothing once loading ends. A missing or misshapen tensor means the
    folder is not the checkpoint config.json describes: a one-line :class:`InputError`, not a
    torch shape error deep inside a forward pass.
    """

    def __init__(self, tensors: dict[str, Tensor], model_type: str, device: torch.device) -> None:
        self.tensors = tensors
        self.model_type = model_type
        self.device = device

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def take(self, name: str, *shape: int) -> Tensor:
        if name not in self.tensors:
            raise InputError(
                f"the weights have no tensor {name!r}; is this really a {self.model_type} model?"
            )
        t = self.tensors[name]
        if shape and tuple(t.shape) != shape:
            raise InputError(
                f"tensor {name!r} has shape {tuple(t.shape)} but config.json implies {shape}"
            )
        if not t.is_floating_point():
            raise InputError(f"tensor {name!r} holds {t.dtype}, not floating-point weights")
        return finite_tensor(t.to(device=self.device, dtype=torch.float32), name)

    def optional(self, name: str, *shape: int) -> Tensor | None:
        return self.take(name, *shape) if name in self.tensors else None


def finite_tensor(t, name: str):
    """A checkpoint tensor (already float32) without NaN or ±inf, else a one-line refusal."""
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise InputError(
            f"tensor {name!r} of the checkpoint holds {float(t[index])!r} at {list(index)} "
            f"(NaN, infinite, or beyond float32's range); the weights are corrupt"
        )
    return t


def config_int(cfg: dict, *names: str, default: int | None = None) -> int:
    """The first of ``names`` present in config.json, as a positive int."""
    for name in names:
        if cfg.get(name) is not None:
            value = cfg[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"config.json: {name} must be a positive integer, got {value!r}")
            return value
    if default is not None:
        return default
    raise InputError(f"config.json lacks {names[0]!r}")


# --- masks -------------------------------------------------------------------------------------


def hidden_mask(n: int, mode: str, pad_positions: tuple[int, ...], device: torch.device) -> Tensor:
    """``(n, n)`` bool, True where query row i may NOT see key column j.

    "padding" hides the pad key columns; "causal" hides the future and, like a decoder given an
    attention_mask, the pad columns too; "none" hides nothing.
    """
    hidden = torch.zeros(n, n, dtype=torch.bool, device=device)
    if mode == "none":
        return hidden
    if pad_positions:
        hidden[:, list(pad_positions)] = True
    if mode == "causal":
        hidden |= torch.ones(n, n, dtype=torch.bool, device=device).triu(1)
    return hidden


# --- attention ---------------------------------------------------------------------------------


@dataclass
class AttentionParams:
    """One layer's attention, in right-multiplication form."""

    w_q: Tensor  # (d_model, h*d_k)
    b_q: Tensor | None  # (h*d_k,)
    w_k: Tensor  # (d_model, kv*d_k)
    b_k: Tensor | None
    w_v: Tensor  # (d_model, kv*d_k)
    b_v: Tensor | None
    w_o: Tensor  # (h*d_k, d_model)
    b_o: Tensor | None  # (d_model,)
    heads: int
    kv_heads: int
    d_k: int
    scale: float  # scaled = scores * scale
    scale_formula: str  # e.g. "S / √d_k"
    rope: tuple[Tensor, Tensor] | None = None  # cos, sin: (n, d_k)

    @property
    def head_groups(self) -> tuple[int, ...]:
        """For each query head, the key/value head it reads (GQA: ``i // (h / kv)``)."""
        rep = self.heads // self.kv_heads
        return tuple(i // rep for i in range(self.heads))


def rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair (x_j, x_{j+d/2}) by the angle of the token's position."""
    return (x * cos) + (rotate_half(x) * sin)


def split_heads(x: Tensor, heads: int) -> Tensor:
    n = x.shape[0]
    return x.view(n, heads, -1).transpose(0, 1)  # (heads, n, d_k)


def attention(
    x: Tensor, p: AttentionParams, hidden: Tensor, record: dict[str, Tensor] | None = None
) -> Tensor:
    """Multi-head (or grouped-query) self-attention of ``x (n, d_model)``; returns (n, d_model).

    When ``record`` is a dict, every intermediate tensor is stored in it under its stage name.
    """
    q = split_heads(linear(x, p.w_q, p.b_q), p.heads)  # (h, n, d_k)
    k = split_heads(linear(x, p.w_k, p.b_k), p.kv_heads)  # (kv, n, d_k)
    v = split_heads(linear(x, p.w_v, p.b_v), p.kv_heads)  # (kv, n, d_k)
    if record is not None:
        record.update(q=q, k=k, v=v)
    if p.rope is not None:
        cos, sin = p.rope
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if record is not None:
            record.update(q_rotated=q, k_rotated=k)
    rep = p.heads // p.kv_heads
    k_all = k.repeat_interleave(rep, dim=0) if rep > 1 else k  # (h, n, d_k): head i reads i//rep
    v_all = v.repeat_interleave(rep, dim=0) if rep > 1 else v
    # From here on the same stage functions as the toy engine (models.attention).
    scores = att.dot_scores(q, k_all)  # (h, n, n)
    scaled = scores * p.scale
    masked = att.apply_mask(scaled, hidden)
    weights = att.softmax(masked)  # an all-hidden row gets zero weights, never NaN
    head_output = att.weighted_sum(weights, v_all)  # (h, n, d_k)
    concat = att.concat_heads(head_output)  # (n, h*d_k)
    output = linear(concat, p.w_o, p.b_o)  # (n, d_model)
    if record is not None:
        record.update(
            scores=scores,
            scaled=scaled,
            masked=masked,
            weights=weights,
            head_output=head_output,
            concat=concat,
            output=output,
        )
    return output


class Architecture:
    """What the engine needs from one model family. Subclasses fill in the class attributes
    and implement :meth:`embed`, :meth:`attention_params` and :meth:`block`."""

    model_type = ""
    default_mask = "padding"
    rotary = False
    input_formula = "X = h_L"
    input_description = "The hidden state entering this layer."

    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    max_positions: int
    vocab_size: int

    def embed(self, ids: Tensor, type_ids: Tensor) -> Tensor:
        """Token ids ``(n,)`` -> the hidden state entering block 0, ``(n, d_model)``."""
        raise NotImplementedError

    def attention_input(self, i: int, h: Tensor) -> Tensor:
        """What block ``i``'s attention projects: ``h`` itself, or a pre-norm of it."""
        return h

    def attention_params(self, i: int, n: int) -> AttentionParams:
        raise NotImplementedError

    def block(self, i: int, h: Tensor, hidden: Tensor) -> Tensor:
        """Block ``i``: hidden state in, hidden state out, both ``(n, d_model)``."""
        raise NotImplementedError

    def final(self, h: Tensor) -> Tensor:
        """The final norm after the last block (decoders); identity for BERT."""
        return h
