"""The n_q × n_k stages of a layer (scores … weights), computed when asked, per head and block of rows.

Both engines hand Q, K, V and how to go from them to the weights (:class:`PairSpec`) to a
:class:`PairStore`; it computes the stage, head and rows that are looked at, with the very stage
functions of :mod:`models.engine.attention`, and keeps what it computed within a memory budget. Rows are
always computed in the same fixed blocks, so a tile, a head and the whole stage agree bit for bit.

Memory: Q, K, V and the head outputs are kept (``O(n·d)``); an n×n matrix never has to exist whole.
Blocks are computed and cached on the trace's device, and read there by the reductions and the head
outputs (the ``*_tensor`` reads); the numpy reads (:meth:`PairStore.block`, :meth:`PairStore.rows`, …) are
the crossing to the host of what was asked for (issue 45).
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
from models.engine.pair_outputs import HeadOutputs
from models.engine.pair_spec import PairSpec  # noqa: F401  (re-exported: pairs.PairSpec)

# What computed blocks may hold, in bytes; least recently used blocks go first.
DEFAULT_BUDGET = 768 << 20
BLOCK_BYTES = 16 << 20  # one block of one stage of one head: about this many bytes
# Above this many cells a head (n_q × n_k), the weights come from each row's statistics, never a
# softmax over a stored block (models.engine.long_rows): from 11,586 tokens (16,384 included);
# fewer keep the blocks' softmax.
LONG_CELLS = 1 << 27
StopCheck = Callable[[], bool] | None


SCORE_STAGES = ("scores", "scaled", "biased", "softcapped")  # before the mask: −∞ is an overflow, not a hidden key


class PairStore(HeadOutputs):
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
        self._cache: OrderedDict[tuple[str, int, int], torch.Tensor] = OrderedDict()  # on the device
        self._cached_bytes = 0
        # Called with (name, head, block) for every block computed (tests and benches count them).
        self.on_compute: Callable[[str, int, int], None] | None = None
        self._head_output: torch.Tensor | None = None
        self._value_norms: torch.Tensor | None = None
        self._lock = threading.RLock()
        self._may_overflow = may_overflow(spec) if spec.ready is None else None  # projected when read: per head
        self._head_overflows: dict[int, bool] = {}  # ... each head's bound, made once (a pass has 512 tiles a head)
        if long is None:
            long = self.n_q * self.n_k > LONG_CELLS
        self.long = LongRows(self) if long else None

    def _checked(self, name: str, head: int, r0: int, array: torch.Tensor) -> torch.Tensor:
        """``array`` (rows ``r0:`` of one head), refused when it holds NaN or ±∞ (−∞ is the mask):
        every reader (export, window, explain, survey, comparison) gets the same one line. Only
        looked at when the scores can overflow at all (:func:`may_overflow`): free otherwise."""
        if self._overflows(head):
            check_pair_block(self.spec, name, head, r0, array)
            if name not in SCORE_STAGES:  # a score overflowing to −∞ looks hidden from the mask on
                pre = [n for n in self.names if n in SCORE_STAGES][-1]
                self.rows(pre, head, r0, r0 + array.shape[0], keep=self.fits)  # checked by block()
        return array

    def _overflows(self, head: int) -> bool:
        """Whether a score of ``head`` may leave float32's range (:func:`may_overflow`): its blocks are looked at."""
        may = self._may_overflow
        if may is None:  # Q and K of a long input, projected head by head: this head's bound, once
            may = self._head_overflows.get(head)
            if may is None:
                g = self.spec.head_groups[head]
                self.ready(head)
                may = may_overflow(replace(self.spec, q=self.spec.q[head : head + 1], k=self.spec.k[g : g + 1]))
                self._head_overflows[head] = may
            if may:
                self.ready()  # the message names the largest |q| and |k| of every head
        return may

    def check_tile(self, name: str, head: int, r0: int, c0: int, tile: torch.Tensor) -> None:
        """The check of a block (:meth:`block_tensor`) for a tile of stage ``name``, rows ``r0:`` and keys
        ``c0:`` (a streamed pass's, models.engine.long_stages), and of the scores under it from the mask on."""
        if self._overflows(head):
            check_pair_block(self.spec, name, head, r0, tile, c0)
            if name not in SCORE_STAGES and c0 < self.n_keys:
                pre = [n for n in self.names if n in SCORE_STAGES][-1]
                r1, c1 = r0 + tile.shape[0], min(self.n_keys, c0 + tile.shape[1])
                with torch.no_grad():
                    check_pair_block(self.spec, pre, head, r0, self._chain(pre, head, r0, r1, c0, c1, sink=False), c0)

    @property
    def score_stages(self) -> tuple[str, ...]:
        """This store's stages before the mask (−∞ there is an overflow, not a hidden key)."""
        return tuple(n for n in self.names if n in SCORE_STAGES)

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
        if name in SCORE_STAGES:
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
            a = self._chain("weights", head, r0, r1, c0, c1, out=out)  # (r, c [+ 1])
            norms = self.value_norms()[head, c0:c1].to(a.dtype)
            if out is not None and s.sinks is None:  # a streamed pass's tile, its own: in place
                return a.mul_(norms)
            return a * (norms if s.sinks is None else torch.cat([norms, a.new_zeros(1)]))
        if name == "weights" and self.long is not None:  # exp((masked − m) / T − l), never a softmax here
            w = self.long.weights(head, r0, r1, c0, c1, scratch=out)
            return w if s.sinks is None else torch.cat([w, self.long.weights(head, r0, r1, self.n_keys, self.n_k)], 1)
        x = self._scores(head, r0, r1, c0, c1, out)  # (1, r, c)
        if name == "scores":
            return x[0] if s.sinks is None else with_sink(x, s.sinks[head : head + 1])[0]
        h0, h1 = s.mask.hidden_span(r0, r1, c0, c1)
        hidden = s.mask.rows(r0, r1, self.n_keys, x.device, h0, h1) if h1 > h0 else None
        bias = None if s.bias is None else s.bias[head : head + 1, r0:r1, c0:c1]
        return after_scores(x, self._variant(head, sink), q0=r0, k0=c0, hidden=hidden, hidden_from=h0 - c0, bias=bias,
                            upto=name, own=True)[0]  # fmt: skip

    def masked(self, head: int, r0: int, r1: int, c0: int, c1: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """The masked scores of ``head``, rows ``r0:r1``, keys ``c0:c1`` (no sink column), ``(r, c)`` on the
        trace's device, computed and not kept: the long rows' read (``out``: as :meth:`_chain`'s)."""
        return self._chain("masked", head, r0, r1, c0, c1, sink=False, out=out)

    def region_block(self, name: str, head: int, r0: int, r1: int, c0: int, c1: int, sink: bool = True,
              out: torch.Tensor | None = None) -> torch.Tensor:
        """Stage ``name`` of ``head``, rows ``r0:r1``, keys ``c0:c1`` (then the sink's column if ``sink``),
        on the trace's device, computed and not kept: the long stages' read (``out``: as :meth:`_chain`'s)."""
        return self._chain(name, head, r0, r1, c0, c1, sink=sink, out=out)

    def _variant(self, head: int, sink: bool = True) -> Variant:
        """The one function's description of this head's steps (the mask is the store's own, built
        per block by :class:`MaskSpec` and handed over as ``hidden``)."""
        return replace(self.spec.variant.with_mask(MaskSpec()).head(head, sink), bias=None)  # bias: sliced per block

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

    def block_tensor(self, name: str, head: int, block: int, keep: bool = True) -> torch.Tensor:
        """One block of rows of a stage, float32 on the trace's device, from the cache when it is
        there (``keep=False``: not added to the cache, for a pass over everything such as an export)."""
        if name not in self.names:
            raise KeyError(f"no stage {name!r}; this layer has {', '.join(self.names)}")
        key = (name, head, block)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        # Computed outside the lock: the GUI thread reading one cell never waits for a whole pass.
        x = self._weighted_from_cache(head, block) if name == "weighted_norms" else None
        if x is None:
            with torch.no_grad():
                x = self._compute(name, head, block).to(torch.float32)
        self._checked(name, head, block * self.block_rows, x)
        size = x.numel() * 4
        if keep and size <= self.budget:
            with self._lock:
                if key not in self._cache:
                    self._cache[key] = x
                    self._cached_bytes += size
                while self._cached_bytes > self.budget:
                    _, old = self._cache.popitem(last=False)
                    self._cached_bytes -= old.numel() * 4
        return x

    def block(self, name: str, head: int, block: int, keep: bool = True) -> np.ndarray:
        """:meth:`block_tensor` on the host, float32 numpy."""
        return to_numpy(self.block_tensor(name, head, block, keep))

    def visible_tensor(self, name: str, head: int, block: int) -> tuple[torch.Tensor, int]:
        """``(x, c0)``: keys ``c0:c0 + x.shape[1]`` of one block of rows, those some query of it may
        see (after the mask the others are −∞, or exactly 0 for weights, by definition), for a
        pass that needs only them (the display's peak reduction), on the trace's device. Whole
        blocks, cached, while the whole stage fits the budget; beyond, computed and not kept:
        expanding each block to every key (fresh pages of 64 MiB at 16,384 tokens) took half the
        time of a pass."""
        r0, r1, c0, c1 = self._span(name, block)
        if self.spec.sinks is not None:  # the sink's column is not next to the visible keys: all of them
            return self.block_tensor(name, head, block), 0
        if self.heads * self.n_q * self.n_k * 4 <= self.budget or (c0, c1) == (0, self.n_k):
            return self.block_tensor(name, head, block)[:, c0:c1], c0
        with self._lock:
            hit = self._cache.get((name, head, block))
        if hit is not None:
            return hit[:, c0:c1], c0
        with torch.no_grad():
            x = self._chain(name, head, r0, r1, c0, c1).to(torch.float32)
        return self._checked(name, head, r0, x), c0

    def visible_block(self, name: str, head: int, block: int) -> tuple[np.ndarray, int]:
        """:meth:`visible_tensor` on the host."""
        x, c0 = self.visible_tensor(name, head, block)
        return to_numpy(x), c0

    def iter_tensors(self, name: str, head: int, should_stop: StopCheck = None,
                     keep: bool = True) -> Iterator[tuple[int, torch.Tensor]]:  # fmt: skip
        """``(first row, block)`` for every block of one head's stage, in order, on the trace's device."""
        for b in range(self.blocks):
            if should_stop is not None and should_stop():
                raise Cancelled(name)
            yield b * self.block_rows, self.block_tensor(name, head, b, keep)

    def iter_blocks(self, name: str, head: int, should_stop: StopCheck = None,
                    keep: bool = True) -> Iterator[tuple[int, np.ndarray]]:  # fmt: skip
        """:meth:`iter_tensors`, each block on the host."""
        for start, x in self.iter_tensors(name, head, should_stop, keep):
            yield start, to_numpy(x)

    def rows_tensor(self, name: str, head: int, r0: int, r1: int, keep: bool = True, own: bool = False) -> torch.Tensor:
        """Rows ``r0:r1`` of one head, ``(r1 − r0, n_k)`` float32 on the trace's device (``keep=False``:
        blocks computed for it are not cached, for a pass over a stage larger than the budget; ``own``:
        never a view of a cached block)."""
        r0, r1 = max(0, r0), min(self.n_q, r1)
        if r1 <= r0:
            return torch.empty((0, self.n_k), dtype=torch.float32, device=self.spec.q.device)
        first, last = r0 // self.block_rows, (r1 - 1) // self.block_rows
        parts = [self.block_tensor(name, head, b, keep) for b in range(first, last + 1)]
        x = torch.cat(parts) if len(parts) > 1 else parts[0].clone() if own else parts[0]
        return x[r0 - first * self.block_rows : r1 - first * self.block_rows]

    def rows(self, name: str, head: int, r0: int, r1: int, keep: bool = True) -> np.ndarray:
        """:meth:`rows_tensor` on the host, ``(r1 − r0, n_k)`` float32 numpy of its own."""
        return to_numpy(self.rows_tensor(name, head, r0, r1, keep, own=True))

    def head(self, name: str, head: int, should_stop: StopCheck = None) -> np.ndarray:
        return self.full(name, should_stop, (head,))[0]

    def full(self, name: str, should_stop: StopCheck = None, heads: tuple[int, ...] | None = None) -> np.ndarray:
        """The whole stage, ``(h, n_q, n_k)`` (``heads``: those alone): only for inputs small enough to hold it."""
        heads = range(self.heads) if heads is None else heads
        out = torch.empty((len(heads), self.n_q, self.n_k), dtype=torch.float32, device=self.spec.q.device)
        for i, h in enumerate(heads):
            for start, x in self.iter_tensors(name, h, should_stop):
                out[i, start : start + x.shape[0]] = x
        return to_numpy(out)  # one crossing

    @property
    def fits(self) -> bool:
        """True when every head of a stage fits the cache's budget."""
        return self.heads * self.n_q * self.n_k * 4 <= self.budget

    def region(self, name: str, head: int, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """Rows ``r0:r1``, columns ``c0:c1`` of one head (a zoomed tile): in a long store computed for
        those cells alone, from Q and K (the weights from the rows' statistics), never whole rows."""
        r0, r1, c0, c1 = max(0, r0), max(0, min(self.n_q, r1)), max(0, c0), max(0, min(self.n_k, c1))
        if self.long is None:
            return to_numpy(self.rows_tensor(name, head, r0, r1, keep=self.fits)[:, c0:c1])
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
            return to_numpy(self._checked(name, head, r0, x.to(torch.float32)))

    def cell(self, name: str, head: int, i: int, j: int) -> float:
        return float(self.rows_tensor(name, head, i, i + 1)[0, j])
