"""The head outputs of a :class:`~models.engine.pairs.PairStore`: ``O = A V`` and the value norms
``‖f_h(x_j)‖`` (the weighted-norms stage), on the trace's device, from the store's blocks of weights
(over the keys each block's queries see) or a long input's rows' statistics."""

from __future__ import annotations

from collections.abc import Callable

import torch

from models.config import Cancelled
from models.engine import attention as att

StopCheck = Callable[[], bool] | None


class HeadOutputs:
    """What a store reads from its weights and V: mixed into :class:`~models.engine.pairs.PairStore`."""

    def _weighted_from_cache(self, head: int, block: int) -> torch.Tensor | None:
        """The weighted norms of a block whose weights are cached: ``a_ij ‖f_h(x_j)‖``, the very
        float32 product the chain makes, without running the chain from Q and K again (a whole
        trace asks for the weights, then for the weighted norms)."""
        if self.spec.q.dtype != torch.float32:
            return None
        with self._lock:
            a = self._cache.get(("weights", head, block))
        if a is None:
            return None
        norms = self.value_norms()[head].to(a.device, torch.float32)
        if self.n_k == self.n_keys:
            return a * norms
        out = torch.zeros_like(a)  # a sink's column: no value, so no norm
        out[:, : self.n_keys] = a[:, : self.n_keys] * norms
        return out

    def _visible_keys(self, head: int, block: int) -> tuple[torch.Tensor, int]:
        """The weights of the keys some query of the block sees, ``(x, c0)`` as :meth:`visible_tensor`,
        without a learned sink's column (it has no value row to weigh)."""
        if self.spec.sinks is None:
            return self.visible_tensor("weights", head, block)
        r0, r1, c0, c1 = self._span("weights", block)
        with self._lock:
            hit = self._cache.get(("weights", head, block))
        if hit is None and self.heads * self.n_q * self.n_k * 4 <= self.budget:
            hit = self.block_tensor("weights", head, block)
        if hit is not None:
            return hit[:, c0:c1], c0
        with torch.no_grad():
            return self._chain("weights", head, r0, r1, c0, c1)[:, : c1 - c0].to(torch.float32), c0

    def value_norms(self) -> torch.Tensor:
        """``‖f_h(x_j)‖`` (h, n_k), computed once (see :func:`models.engine.attention.value_norms`)."""
        done = self._value_norms
        if done is not None:
            return done
        s = self.spec
        assert s.w_o is not None, "value norms need the output matrix"
        self.ready(values=True)
        with torch.no_grad():
            norms = att.value_norms(s.v, s.w_o, s.head_groups)  # (h, n_k)
        with self._lock:
            if self._value_norms is None:
                self._value_norms = norms
            return self._value_norms

    def head_output(self, should_stop: StopCheck = None) -> torch.Tensor:
        """``O_i = A_i V_g(i)``, (h, n_q, d_v): computed once, block by block, from the weights."""
        done = self._head_output
        if done is not None:
            return done
        s = self.spec
        self.ready(values=True)
        out = torch.empty(self.heads, self.n_q, self.d_v, dtype=s.v.dtype, device=s.v.device)
        with torch.no_grad():
            for h in range(self.heads):
                v = s.v[s.head_groups[h]]  # (n_k, d_v)
                for b in range(self.blocks):
                    if should_stop is not None and should_stop():
                        raise Cancelled("head_output")
                    # Keys no query of the block sees have weight 0 exactly: left out of the sum.
                    a, c0 = self._visible_keys(h, b)  # (r, c), keys c0:c0 + c
                    start = b * self.block_rows
                    out[h, start : start + a.shape[0]] = att.weighted_sum(a.to(v.dtype), v[c0 : c0 + a.shape[1]])
        with self._lock:
            if self._head_output is None:
                self._head_output = out
            return self._head_output

    def head_output_rows(self, r0: int, r1: int, head: int | None = None) -> torch.Tensor:
        """Rows ``r0:r1`` of ``O = A V``, ``(h, r, d_v)`` (``head``: that head's alone, ``(1, r, d_v)``), from
        those rows' weights alone, over the keys they see: one query's output needs one row of weights
        (``explain --stage output`` of one cell at 20,000 tokens computed every row)."""
        heads = range(self.heads) if head is None else (head,)
        if self._head_output is not None:
            return self._head_output[list(heads), r0:r1]
        s, (v0, v1) = self.spec, self.spec.mask.visible_columns(r0, r1, self.n_keys)
        out = torch.zeros(len(heads), r1 - r0, self.d_v, dtype=s.v.dtype, device=s.v.device)
        with torch.no_grad():
            for i, h in enumerate(heads):
                self.ready(h, values=True)
                if v1 <= v0:
                    continue
                if self.long is not None:  # from the rows' statistics
                    a = self.long.weights(h, r0, r1, v0, v1)
                else:  # the blocks holding these rows (cached when the stage fits the budget)
                    a = self.rows_tensor("weights", h, r0, r1, keep=self.fits)[:, v0:v1]
                v = s.v[s.head_groups[h], v0:v1]  # (c, d_v)
                out[i] = att.weighted_sum(a.to(v.device, v.dtype), v)
        return out
