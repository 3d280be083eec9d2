"""Q, K and V of a long input, projected head by head when first read (issue 34).

At 131,072 tokens the three projections of every head take seconds, and the first rows of the first
head need only that head's Q and K. So the toy's trace of a long input holds Q, K and V as tensors
filled a head at a time (:func:`models.engine.attention.project` of that head's weights: the same
function, the same numbers), when the lazy store first reads the head (:attr:`PairSpec.ready`) or when
a whole stage ``q``, ``k`` or ``v`` is read; a head whose projection overflows float32 is refused
then, with the line :func:`models.checks.check_finite_stages` gives an eager stage.
"""

from __future__ import annotations

import threading

import torch

from models.config import InputError
from models.engine import attention as att
from models.engine.finite import all_finite


class HeadProjections:
    """``q (h, n_q, d_k)``, ``k (h, n_k, d_k)``, ``v (h, n_k, d_v)``, each head computed once, when asked."""

    def __init__(self, x_q: torch.Tensor, x_k: torch.Tensor, weights: dict[str, tuple], largest: float) -> None:
        """``weights``: ``{"q": (W (h, d_model, d), b (h, d) or None), "k": ..., "v": ...}``."""
        self._x = {"q": x_q, "k": x_k, "v": x_k}
        self._w = weights
        self._largest = largest
        self.tensors = {name: torch.empty(w.shape[0], self._x[name].shape[0], w.shape[-1], dtype=torch.float32,
                                          device=x_k.device) for name, (w, _) in weights.items()}  # fmt: skip
        self._done: set[tuple[str, int]] = set()  # (stage, head) projected
        self._lock = threading.Lock()

    def ready(self, head: int, values: bool = True) -> None:
        """Project ``head``'s q and k (and v, if ``values``: the scores and weights need none) now,
        unless done (thread-safe: the GUI may read a cell meanwhile)."""
        for name in ("q", "k", "v") if values else ("q", "k"):
            self._project(name, head)

    def _project(self, name: str, head: int) -> None:
        if (name, head) in self._done:
            return
        with self._lock, torch.no_grad():
            if (name, head) in self._done:
                return
            w, b = self._w[name]
            out = att.project(self._x[name], w[head : head + 1], None if b is None else b[head : head + 1])
            if not all_finite(out):
                raise InputError(f"stage '{name}' overflows float32 (head {head}): the inputs or weights are "
                                 f"too large (largest |input| {self._largest:.3g}); scale them down")  # fmt: skip
            self.tensors[name][head] = out[0]  # (n, d)
            self._done.add((name, head))

    def whole(self, name: str) -> torch.Tensor:
        """Stage ``name`` (``q``, ``k`` or ``v``) of every head."""
        for head in range(self.tensors[name].shape[0]):
            self._project(name, head)
        return self.tensors[name]
