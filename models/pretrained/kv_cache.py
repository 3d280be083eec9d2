"""A key/value cache for generation: each layer keeps the keys and values of every token fed so far.

One :class:`LayerKV` per layer is handed to ``Architecture.block(i, h, hidden, cache=...)``, which
passes it to :func:`models.pretrained.common.attention`; there only the new tokens are projected
(after qk-norm and rotation at their own positions), joined to the cached keys and values, and
attended causally (plus the layer's sliding window). Every family that runs its attention through
that one function gets generation for free; it only has to size its rotary table by
:func:`~models.pretrained.architecture.context_length` and place learned positions by ``embed_at``.

The steps are those of :class:`~models.pretrained.common.AttentionParams`, written out explicitly
(no fused kernel) so that the new rows' weights are kept: the explorer shows them.
"""

from __future__ import annotations

from dataclasses import replace

from torch import Tensor

from models.engine import attention as att
from models.engine.attend import attend
from models.pretrained.common import AttentionParams, linear, project_qkv


class LayerKV:
    """One layer's cached keys and values ``(kv, t, d_k)`` and the last rows' weights.

    The keys and values live in buffers of ``capacity`` positions (doubled when full), so a step
    writes only its new token's key and value instead of copying the whole cache."""

    def __init__(self, capacity: int = 0) -> None:
        self.capacity = capacity
        self.length = 0
        self._k: Tensor | None = None  # (kv, capacity, d_k), after qk-norm and rotation
        self._v: Tensor | None = None
        self.weights: Tensor | None = None  # (h, m, t): the newest tokens' attention rows

    @property
    def k(self) -> Tensor | None:
        return None if self._k is None else self._k[:, : self.length]  # (kv, t, d_k)

    @property
    def v(self) -> Tensor | None:
        return None if self._v is None else self._v[:, : self.length]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new tokens' keys and values ``(kv, m, d_k)``; every key and value so far."""
        start, t = self.length, self.length + k.shape[1]
        if self._k is None or t > self._k.shape[1]:
            room = max(t, self.capacity, 2 * (0 if self._k is None else self._k.shape[1]))
            new_k, new_v = k.new_empty(k.shape[0], room, k.shape[2]), v.new_empty(v.shape[0], room, v.shape[2])
            if self._k is not None:
                new_k[:, :start], new_v[:, :start] = self._k[:, :start], self._v[:, :start]
            self._k, self._v = new_k, new_v
        self._k[:, start:t], self._v[:, start:t] = k, v
        self.length = t
        return self._k[:, :t], self._v[:, :t]

    def attend(self, x: Tensor, p: AttentionParams) -> Tensor:
        """Attention of the new tokens ``x (m, d_model)`` over every token so far; (m, d_model):
        the one function (:func:`models.engine.attend.attend`) with the layer's own variant (causal, its
        sliding band, soft-cap and learned sinks), the new rows at positions ``start..``."""
        start, m = self.length, x.shape[0]
        t = start + m
        if p.rope is not None:  # the table covers positions 0..t-1; the new tokens take the last m
            cos, sin = p.rope
            p = replace(p, rope=(cos[start:t], sin[start:t]))
        q, k, v = project_qkv(x, p)  # q (h, m, d_k), k v (kv, m, d_k)
        k, v = self.append(k, v)  # (kv, t, d_k)
        head_output, weights = attend(q, k, v, p.variant(causal=True), q0=start)  # (h, m, d_k), (h, m, t[+1])
        self.weights = weights[..., :t]  # (h, m, t): the keys' rows (a sink's share is 1 − their sum)
        return linear(att.concat_heads(head_output), p.w_o, p.b_o)  # (m, d_model)


def new_cache(layers: int, capacity: int = 0) -> list[LayerKV]:
    """One empty cache per layer, each with room for ``capacity`` positions."""
    return [LayerKV(capacity) for _ in range(layers)]
