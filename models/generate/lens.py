"""The logit lens of a generation, computed for the cells asked (issue 47: the lens at the cost of a step).

The exact lens of one cell (layer, position) is the final norm and the unembedding of that layer's residual
stream there, then a softmax over the whole vocabulary: SmolLM2's 49,152 logits, 576 wide, per cell, some
6x a step's work for one position's 30 layers. So generation only records each layer's residual stream
(``(L, n, d)``, cheap) and :class:`Lens` computes a cell when a view or a command asks for it, all missing
cells of one ask in one product with the head (chunks of :data:`LENS_CHUNK_BYTES` of logits), memoised:
each cell is computed once. The numbers are those the eager lens computed (the same head, the same
rows): each layer's top :data:`LENS_TOP` tokens and probabilities, and the probability of the sequence's
next token (the last position's: the model's own top token). A cell whose logits are not finite is
refused by the one gate (``InputError``), when it is read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import numpy as np
import torch
from torch import Tensor

from models.engine.finite import refuse_nonfinite
from models.engine.host import to_numpy

LENS_TOP = 5  # the lens' most likely tokens kept per (layer, position): the hover's list
F32 = 4
LENS_CHUNK_BYTES = 64 << 20  # logits of this many bytes at a time
LOGITS = "the model's activations are too large (its logits overflow)"


class Lens:
    """``(L, n)`` cells of the logit lens, computed on demand (:meth:`cells`) and kept.

    ``states (L, n, d)``: each layer's output at each position; ``next_ids (n,)``: the token whose
    probability each position's cells report; ``head``: a :class:`~models.generate.head.OutputHead`
    (``logits``: final norm then unembedding, a GGUF head read by the same row-blocked reader)."""

    def __init__(self, head, states: Tensor, next_ids: list[int], token: Callable[[int], str]) -> None:
        L, n = states.shape[:2]
        self.shape = (L, n)
        self.token = token  # id -> its text (the tokenizer's)
        self._head, self._states = head, states
        self._next = torch.tensor(next_ids, dtype=torch.long, device=states.device)
        k = min(LENS_TOP, head.vocab_size)
        self._done = np.zeros((L, n), bool)
        self._prob = np.zeros((L, n), np.float32)
        self._top_ids = np.zeros((L, n, k), np.int64)
        self._top_prob = np.zeros((L, n, k), np.float32)
        self._lock = threading.Lock()  # the window reads from its read thread and on hover

    @classmethod
    def computed(cls, top_ids: np.ndarray, top_prob: np.ndarray, prob: np.ndarray,
                 token: Callable[[int], str]) -> Lens:  # fmt: skip
        """A lens whose every cell is given (an encoder's, computed whole)."""
        lens = cls.__new__(cls)
        lens.shape, lens.token, lens._lock = prob.shape, token, threading.Lock()
        lens._done = np.ones(prob.shape, bool)
        lens._prob, lens._top_ids, lens._top_prob = prob, top_ids, top_prob
        return lens

    @classmethod
    def unread(cls, layers: int, n: int, token: Callable[[int], str]) -> Lens:
        """The lens of a generation asked without it (``GenerateSettings.lens`` False): zeros."""
        return cls.computed(np.zeros((layers, n, LENS_TOP), np.int64), np.zeros((layers, n, LENS_TOP), np.float32),
                            np.zeros((layers, n), np.float32), token)  # fmt: skip

    def has(self, layer: int, position: int) -> bool:
        """Whether the cell is computed already (reading it costs nothing)."""
        return bool(self._done[layer, position])

    @property
    def computed_cells(self) -> int:
        return int(self._done.sum())

    def cells(self, layers: Iterable[int] | None = None, positions: Iterable[int] | None = None) -> None:
        """Compute the cells ``layers × positions`` not computed yet (default: every layer, every position)."""
        L, n = self.shape
        ls = np.arange(L) if layers is None else np.asarray(list(layers), np.int64)
        ps = np.arange(n) if positions is None else np.asarray(list(positions), np.int64)
        with self._lock:
            want = np.zeros((L, n), bool)
            want[np.ix_(ls, ps)] = True
            layer, pos = np.nonzero(want & ~self._done)  # layer-major
            if layer.size:
                with torch.no_grad():
                    self._compute(layer, pos)

    def _compute(self, layer: np.ndarray, pos: np.ndarray) -> None:
        step = max(1, LENS_CHUNK_BYTES // (F32 * self._head.vocab_size))
        k = self._top_ids.shape[-1]
        for a in range(0, layer.size, step):
            li, pi = layer[a : a + step], pos[a : a + step]
            at = torch.from_numpy(li).to(self._states.device), torch.from_numpy(pi).to(self._states.device)
            logits = self._head.logits(self._states[at])  # (rows, vocab)
            probs = torch.softmax(logits, dim=-1)  # torch's own (a float32 sum of exp(x - max) lost 1e-5)
            top = torch.topk(logits, k, dim=-1)
            top_prob = to_numpy(probs.gather(1, top.indices))
            prob = to_numpy(probs.gather(1, self._next[at[1], None])[:, 0])
            refuse_nonfinite(top_prob, "the logit lens", LOGITS, ("cell", "rank"))
            refuse_nonfinite(prob, "the logit lens", LOGITS, ("cell",))
            self._top_ids[li, pi] = to_numpy(top.indices)
            self._top_prob[li, pi], self._prob[li, pi] = top_prob, prob
            self._done[li, pi] = True

    def top(self, layer: int, position: int) -> tuple[np.ndarray, np.ndarray]:
        """One cell's top token ids and probabilities (computed if not yet)."""
        self.cells([layer], [position])
        return self._top_ids[layer, position], self._top_prob[layer, position]

    def prob(self, layer: int, position: int) -> float:
        """One cell's probability of the sequence's next token (computed if not yet)."""
        self.cells([layer], [position])
        return float(self._prob[layer, position])

    def column(self, position: int) -> tuple[np.ndarray, np.ndarray]:
        """The position over every layer: ``(L, k)`` top ids and ``(L,)`` next-token probabilities."""
        self.cells(None, [position])
        return self._top_ids[:, position], self._prob[:, position]

    def whole(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every cell: ``top_ids (L, n, k)``, ``top_prob (L, n, k)``, ``prob (L, n)`` (copies)."""
        self.cells()
        return self._top_ids.copy(), self._top_prob.copy(), self._prob.copy()
