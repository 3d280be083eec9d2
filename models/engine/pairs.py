"""The n_q × n_k stages of a layer (scores … weights), computed when asked, per head and block of rows.

Both engines hand Q, K, V and how to go from them to the weights (:class:`PairSpec`) to a
:class:`PairStore`; it computes the stage, head and rows that are looked at, with the very stage
functions of :mod:`models.engine.attention`, and keeps what it computed within a memory budget. Rows are
always computed in the same fixed blocks, so a tile, a head and the whole stage agree bit for bit.

Memory: Q, K, V and the head outputs are kept (``O(n·d)``); an n×n matrix never has to exist whole.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import torch

from models.config import Cancelled
from models.engine import attention as att
from models.engine.attend import Variant, after_scores, with_sink
from models.engine.finite import check_pair_block, may_overflow
from models.engine.host import to_numpy
from models.engine.long_rows import LongRows
from models.engine.masks import MaskSpec  # (re-exported: pairs.MaskSpec)
from models.engine.pair_spec import PairSpec  # noqa: F401  (re-exported: pairs.PairSpec)

# What computed blocks may hold, in bytes; least recently used blocks go first.
DEFAULT_BUDGET = 768 << 20
BLOCK_BYTES = 16 << 20  # one block of one stage of one head: about this many bytes
# Above this many cells a head (n_q × n_k), the weights come from each row's statistics, never a
# softmax over a stored block (models.engine.long_rows): from 11,586 tokens (16,384 included);
# fewer keep the blocks' softmax.
LONG_CELLS = 1 << 27
StopCheck = Callable[[], bool] | None


_SCORE_STAGES = ("scores", "scaled", "biased", "softcapped")  # before the mask: −∞ is an overflow, not a hidden key


class PairStore:
    """Answers "stage ``name``, head ``h``, rows ``r0:r1``" for one :class:`PairSpec`.

    Thread-safe: the worker computes while the GUI thread may read one cell under the mouse.
    """

    def __init__(self, spec: PairSpec, budget: int | None = None, long: bool | None = None) -> None:
        """``long``: the weights from each row's statistics (:mod:`models.engine.long_rows`); None: when a
        head has more than :data:`LONG_CELLS` cells."""
        self.spec = spec
        self.heads, self.n_q, _ = spec.q.shape
        self.n_keys = spec.k.shape[1]  # the real keys
        self.n_k = self.n_keys + (spec.sinks is not None)  # columns: the keys (and the sink)
        self.d_v = spec.v.shape[-1]
        self.budget = DEFAULT_BUDGET if budget is None else budget
        # Fixed row blocks (a multiple of 8 rows), decided by the number of keys alone (a sink's
        # column does not make a block of 4,096 keys one row shorter, and the stage one block longer).
        rows = max(8, BLOCK_BYTES // (4 * max(1, self.n_keys)) // 8 * 8)
        self.block_rows = min(rows, max(8, -(-self.n_q // 8) * 8))
        self.blocks = -(-self.n_q // self.block_rows)
        self._cache: OrderedDict[tuple[str, int, int], np.ndarray] = OrderedDict()
        self._cached_bytes = 0
        # Called with (name, head, block) for every block computed (tests and benches count them).
        self.on_compute: Callable[[str, int, int], None] | None = None
        self._head_output: torch.Tensor | None = None
        self._value_norms: torch.Tensor | None = None
        self._lock = threading.RLock()
        self._may_overflow = may_overflow(spec) if spec.ready is None else None  # projected when read: per head
        if long is None:
            long = self.n_q * self.n_k > LONG_CELLS
        self.long = LongRows(self) if long else None

    def _checked(self, name: str, head: int, r0: int, array: np.ndarray) -> np.ndarray:
        """``array`` (rows ``r0:`` of one head), refused when it holds NaN or ±∞ (−∞ is the mask):
        every reader (export, window, explain, survey, comparison) gets the same one line. Only
        looked at when the scores can overflow at all (:func:`may_overflow`): free otherwise."""
        may = self._may_overflow
        if may is None:  # Q and K of a long input, projected head by head: this head's bound
            g = self.spec.head_groups[head]
            self.ready(head)
            may = may_overflow(replace(self.spec, q=self.spec.q[head : head + 1], k=self.spec.k[g : g + 1]))
            if may:
                self.ready()  # the message names the largest |q| and |k| of every head
        if may:
            check_pair_block(self.spec, name, head, r0, array)
            if name not in _SCORE_STAGES:  # a score overflowing to −∞ looks hidden from the mask on
                pre = [n for n in self.names if n in _SCORE_STAGES][-1]
                self.rows(pre, head, r0, r0 + array.shape[0], keep=self.fits)  # checked by block()
        return array

    @property
    def names(self) -> tuple[str, ...]:
        return self.spec.names

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    def clear(self) -> None:
        """Forget every cached block (the next read computes again)."""
        with self._lock:
            self._cache.clear()
            self._cached_bytes = 0

    # --- computing one block -----------------------------------------------------------------
    def _span(self, name: str, block: int) -> tuple[int, int, int, int]:
        """Rows ``r0:r1`` of a block and the keys ``c0:c1`` computed for them: every key before
        the mask, from the mask on only those some query of the block may see."""
        r0, r1 = block * self.block_rows, min(self.n_q, (block + 1) * self.block_rows)
        if name in _SCORE_STAGES:
            return r0, r1, 0, self.n_keys
        c0, c1 = self.spec.mask.visible_columns(r0, r1, self.n_keys)  # the keys (a sink is always seen)
        return r0, r1, c0, c1

    def _compute(self, name: str, head: int, block: int) -> torch.Tensor:
        """Stage ``name`` of ``head`` for one block of rows, computed from Q, K, V.

        From the mask on, only the keys some query of the block can see are computed (under a causal
        mask, half of them): the others are −∞ (masked) and exactly 0 (weights) by definition."""
        if self.on_compute is not None:
            self.on_compute(name, head, block)
        r0, r1, c0, c1 = self._span(name, block)
        x = self._chain(name, head, r0, r1, c0, c1)  # (r, c1 − c0), then a sink's column if any
        if (c0, c1) == (0, self.n_keys):
            return x
        fill = float("-inf") if name == "masked" else 0.0
        out = torch.empty((r1 - r0, self.n_k), dtype=x.dtype, device=x.device)
        out[:, :c0].fill_(fill)  # each cell written once: the keys no query of the block sees...
        out[:, c1 : self.n_keys].fill_(fill)
        out[:, c0:c1] = x[:, : c1 - c0]  # ...and the computed ones
        if self.n_k > self.n_keys:
            out[:, self.n_keys :] = x[:, c1 - c0 :]  # the sink's column, last
        return out

    def _chain(self, name: str, head: int, r0: int, r1: int, c0: int, c1: int, sink: bool = True,
               out: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """Stage ``name`` of ``head`` for rows ``r0:r1`` and keys ``c0:c1`` (then a sink's column, if ``sink``):
        the scores here (their kinds and what-if edits are this store's), every step after them
        the one attention function's (:func:`models.engine.attend.after_scores`). ``out``: a float32
        scratch buffer ``(r, c)`` the scores may be computed in, and the later steps done in place
        (a streamed pass: fresh pages for every block of scores made it 2.5× slower)."""
        s = self.spec
        if name == "weighted_norms":  # ‖α_ij f_h(x_j)‖ = α_ij ‖f_h(x_j)‖; a sink has no value
            a = self._chain("weights", head, r0, r1, c0, c1)  # (r, c [+ 1])
            norms = self.value_norms()[head, c0:c1].to(a.dtype)
            return a * (norms if s.sinks is None else torch.cat([norms, a.new_zeros(1)]))
        if name == "weights" and self.long is not None:  # exp((masked − m) / T − l), never a softmax here
            w = self.long.weights(head, r0, r1, c0, c1)
            return w if s.sinks is None else torch.cat([w, self.long.weights(head, r0, r1, self.n_keys, self.n_k)], 1)
        x = self._scores(head, r0, r1, c0, c1, out)  # (1, r, c)
        if name == "scores":
            return x[0] if s.sinks is None else with_sink(x, s.sinks[head : head + 1])[0]
        h0, h1 = s.mask.hidden_span(r0, r1, c0, c1)
        hidden = s.mask.rows(r0, r1, self.n_keys, x.device, h0, h1) if h1 > h0 else None
        bias = None if s.bias is None else s.bias[head : head + 1, r0:r1, c0:c1]
        return after_scores(x, self._variant(head, sink), q0=r0, k0=c0, hidden=hidden, hidden_from=h0 - c0, bias=bias,
                            upto=name, own=True)[0]  # fmt: skip

    def _variant(self, head: int, sink: bool = True) -> Variant:
        """The one function's description of this head's steps (the mask is the store's own, built
        per block by :class:`MaskSpec` and handed over as ``hidden``)."""
        s = self.spec
        sinks = None if s.sinks is None or not sink else s.sinks[head : head + 1]
        return replace(s.variant.with_mask(MaskSpec()), sinks=sinks, bias=None)  # the bias: sliced per block

    def ready(self, head: int | None = None, values: bool = False) -> None:
        """Q and K (and V, if ``values``) of ``head`` (None: of every head) computed: a long input's are
        projected head by head when first read (:attr:`PairSpec.ready`)."""
        if self.spec.ready is not None:
            for h in range(self.heads) if head is None else (head,):
                self.spec.ready(h, values)

    def _scores(self, head: int, r0: int, r1: int, c0: int, c1: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """``(1, r, c)`` raw scores of one head (dot, general or additive), with what-if edits."""
        s = self.spec
        self.ready(head)
        g = s.head_groups[head]
        q, k = s.q[head : head + 1, r0:r1], s.k[g : g + 1, c0:c1]  # (1, r, d_k), (1, c, d_k)
        if s.score == "general":
            x = att.general_scores(q, k, s.params["W_g"][head : head + 1])
        elif s.score == "additive":
            p = s.params
            x = att.additive_scores(q, k, p["W_1"][head : head + 1], p["W_2"][head : head + 1], p["w"][head : head + 1])
        else:
            fits = out is not None and out.dtype == q.dtype and out.device == q.device
            x = att.dot_scores(q, k, out[None] if fits else None)  # (1, r, c)
        for (h, row, col), value in (s.score_edits or {}).items():
            if h == head and r0 <= row < r1 and c0 <= col < c1:
                x[0, row - r0, col - c0] = value
        return x

    def _weighted_from_cache(self, head: int, block: int) -> np.ndarray | None:
        """The weighted norms of a block whose weights are cached: ``a_ij ‖f_h(x_j)‖``, the very
        float32 product the chain makes, without running the chain from Q and K again (a whole
        trace asks for the weights, then for the weighted norms)."""
        if self.spec.q.dtype != torch.float32:
            return None
        with self._lock:
            a = self._cache.get(("weights", head, block))
        if a is None:
            return None
        norms = self.value_norms()[head].to("cpu", torch.float32)
        if self.n_k == self.n_keys:
            return to_numpy(torch.from_numpy(a) * norms)  # torch: both cores, one pass
        out = np.zeros_like(a)  # a sink's column: no value, so no norm
        out[:, : self.n_keys] = to_numpy(torch.from_numpy(a[:, : self.n_keys]) * norms)
        return out

    def block(self, name: str, head: int, block: int, keep: bool = True) -> np.ndarray:
        """One block of rows of a stage, float32 numpy, from the cache when it is there
        (``keep=False``: not added to the cache, for a pass over everything such as an export)."""
        if name not in self.names:
            raise KeyError(f"no stage {name!r}; this layer has {', '.join(self.names)}")
        key = (name, head, block)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        # Computed outside the lock: the GUI thread reading one cell never waits for a whole pass.
        array = self._weighted_from_cache(head, block) if name == "weighted_norms" else None
        if array is None:
            with torch.no_grad():
                array = to_numpy(self._compute(name, head, block), torch.float32)
        self._checked(name, head, block * self.block_rows, array)
        if keep and array.nbytes <= self.budget:
            with self._lock:
                if key not in self._cache:
                    self._cache[key] = array
                    self._cached_bytes += array.nbytes
                while self._cached_bytes > self.budget:
                    _, old = self._cache.popitem(last=False)
                    self._cached_bytes -= old.nbytes
        return array

    def visible_block(self, name: str, head: int, block: int) -> tuple[np.ndarray, int]:
        """``(x, c0)``: keys ``c0:c0 + x.shape[1]`` of one block of rows, those some query of it may
        see (after the mask the others are −∞, or exactly 0 for weights, by definition), for a
        pass that needs only them (the display's peak reduction). Whole blocks, cached, while the
        whole stage fits the budget; beyond, computed and not kept: expanding each block to every
        key (fresh pages of 64 MiB at 16,384 tokens) took half the time of a pass."""
        r0, r1, c0, c1 = self._span(name, block)
        if self.spec.sinks is not None:  # the sink's column is not next to the visible keys: all of them
            return self.block(name, head, block), 0
        if self.heads * self.n_q * self.n_k * 4 <= self.budget or (c0, c1) == (0, self.n_k):
            return self.block(name, head, block)[:, c0:c1], c0
        with self._lock:
            hit = self._cache.get((name, head, block))
        if hit is not None:
            return hit[:, c0:c1], c0
        with torch.no_grad():
            array = to_numpy(self._chain(name, head, r0, r1, c0, c1), torch.float32)
        return self._checked(name, head, r0, array), c0

    def _visible_keys(self, head: int, block: int) -> tuple[np.ndarray, int]:
        """The weights of the keys some query of the block sees, ``(x, c0)`` as :meth:`visible_block`,
        without a learned sink's column (it has no value row to weigh)."""
        if self.spec.sinks is None:
            return self.visible_block("weights", head, block)
        r0, r1, c0, c1 = self._span("weights", block)
        with self._lock:
            hit = self._cache.get(("weights", head, block))
        if hit is None and self.heads * self.n_q * self.n_k * 4 <= self.budget:
            hit = self.block("weights", head, block)
        if hit is not None:
            return hit[:, c0:c1], c0
        with torch.no_grad():
            return to_numpy(self._chain("weights", head, r0, r1, c0, c1)[:, : c1 - c0], torch.float32), c0

    # --- public reads ------------------------------------------------------------------------
    def iter_blocks(self, name: str, head: int, should_stop: StopCheck = None,
                    keep: bool = True) -> Iterator[tuple[int, np.ndarray]]:  # fmt: skip
        """``(first row, block)`` for every block of one head's stage, in order."""
        for b in range(self.blocks):
            if should_stop is not None and should_stop():
                raise Cancelled(name)
            yield b * self.block_rows, self.block(name, head, b, keep)

    def rows(self, name: str, head: int, r0: int, r1: int, keep: bool = True) -> np.ndarray:
        """Rows ``r0:r1`` of one head: ``(r1 − r0, n_k)`` (``keep=False``: blocks computed for it
        are not cached, for a pass over a stage larger than the budget)."""
        r0, r1 = max(0, r0), min(self.n_q, r1)
        out = np.empty((max(0, r1 - r0), self.n_k), dtype=np.float32)
        if r1 <= r0:
            return out
        for b in range(r0 // self.block_rows, (r1 - 1) // self.block_rows + 1):
            data, start = self.block(name, head, b, keep), b * self.block_rows
            lo, hi = max(r0, start), min(r1, start + data.shape[0])
            out[lo - r0 : hi - r0] = data[lo - start : hi - start]
        return out

    def head(self, name: str, head: int, should_stop: StopCheck = None) -> np.ndarray:
        out = np.empty((self.n_q, self.n_k), dtype=np.float32)
        for start, data in self.iter_blocks(name, head, should_stop):
            out[start : start + data.shape[0]] = data
        return out

    def full(self, name: str, should_stop: StopCheck = None) -> np.ndarray:
        """The whole stage, ``(h, n_q, n_k)``: only for inputs small enough to hold it."""
        out = np.empty((self.heads, self.n_q, self.n_k), dtype=np.float32)
        for h in range(self.heads):
            for start, data in self.iter_blocks(name, h, should_stop):
                out[h, start : start + data.shape[0]] = data
        return out

    @property
    def fits(self) -> bool:
        """True when every head of a stage fits the cache's budget."""
        return self.heads * self.n_q * self.n_k * 4 <= self.budget

    def region(self, name: str, head: int, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """Rows ``r0:r1``, columns ``c0:c1`` of one head (a zoomed tile): in a long store computed for
        those cells alone, from Q and K (the weights from the rows' statistics), never whole rows."""
        r0, r1, c0, c1 = max(0, r0), max(0, min(self.n_q, r1)), max(0, c0), max(0, min(self.n_k, c1))
        if self.long is None:
            return self.rows(name, head, r0, r1, keep=self.fits)[:, c0:c1]
        if name not in self.names:
            raise KeyError(f"no stage {name!r}; this layer has {', '.join(self.names)}")
        with torch.no_grad():
            if name == "weights":
                return to_numpy(self.long.weights(head, r0, r1, c0, c1))
            k1 = max(c0, min(c1, self.n_keys))
            x = self._chain(name, head, r0, r1, c0, k1)  # (r, k1 − c0 [+ a sink's column])
            if c1 > self.n_keys:
                x = torch.cat([x[:, : k1 - c0], x[:, -1:]], dim=1)
            else:
                x = x[:, : k1 - c0]
            return self._checked(name, head, r0, to_numpy(x, torch.float32))

    def cell(self, name: str, head: int, i: int, j: int) -> float:
        return float(self.rows(name, head, i, i + 1)[0, j])

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
                    a_t = torch.from_numpy(a).to(v.device)
                    out[h, start : start + a.shape[0]] = att.weighted_sum(a_t, v[c0 : c0 + a.shape[1]])
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
                    a = torch.from_numpy(self.rows("weights", h, r0, r1, keep=self.fits)[:, v0:v1])
                v = s.v[s.head_groups[h], v0:v1]  # (c, d_v)
                out[i] = att.weighted_sum(a.to(v.device, v.dtype), v)
        return out

