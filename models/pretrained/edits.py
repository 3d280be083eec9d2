"""What-if edits of a traced pretrained layer: change one number and recompute everything after it.

The same :class:`~models.engine.edits.Edit` as for the toy engine, on the stages the layer's trace shows:

- ``input``: cell ``(row, col)`` of what the layer's attention projects, ``(n, d_model)`` (the hidden
  state entering the layer, after the pre-attention norm where the family has one);
- ``q``: cell ``(head, row, col)`` of ``(h, n, d_k)``; ``k``, ``v``: of ``(kv, n, d_k)`` (grouped-query
  models have fewer key/value heads); these are the projections, so an edit of q is normed (qk-norm
  families) and rotated (rotary families) like the projected value would be;
- ``q_normed``, ``k_normed`` (qk-norm families), ``q_rotated``, ``k_rotated`` (rotary families): the
  same cells after that step; an edit of ``q_normed`` is still rotated, one of ``q_rotated`` is what
  the scores read;
- ``scores``: cell ``(head, query, key)``; ``mask``: cell ``(query, key)``, 1 hides the key, 0 shows it
  (even one the model's own mask or sliding window hides), in the traced layer only.

:meth:`models.pretrained.model.PretrainedModel.trace` takes ``edits=``: the layers below run as
without edits (their cached hidden states are only read), the edited values go through the very
code of the unedited trace (:func:`~models.pretrained.common.project_qkv` with an ``override``,
the layer's :class:`~models.engine.pairs.PairStore` with ``score_edits`` and a custom mask), and no edits
is exactly the unedited trace. Nothing about the model is changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch
from torch import Tensor

from models.config import InputError
from models.engine import pairs
from models.engine.edits import Edit, check_edit
from models.engine.host import to_numpy
from models.pretrained.common import AttentionParams

EDITABLE = ("input", "q", "k", "v", "q_normed", "k_normed", "q_rotated", "k_rotated", "scores", "mask")
RANK = {name: 2 if name in ("input", "mask") else 3 for name in EDITABLE}


def layer_shapes(x: Tensor, p: AttentionParams) -> dict[str, tuple[int, ...]]:
    """The editable stages of the layer whose attention projects ``x (n, d_model)`` with ``p``,
    and their shapes, as the trace names them (see ``project_qkv``)."""
    n = x.shape[0]
    q, kv = (p.heads, n, p.d_k), (p.kv_heads, n, p.d_k)
    shapes: dict[str, tuple[int, ...]] = {"input": tuple(x.shape), "q": q, "k": kv, "v": kv}
    if p.q_norm is not None or p.k_norm is not None:
        shapes |= {"q_normed": q, "k_normed": kv}
    if p.rope is not None:
        shapes |= {"q_rotated": q, "k_rotated": kv}
    return shapes | {"scores": (p.heads, n, n), "mask": (n, n)}


def check_form(edits: Iterable[Edit]) -> None:
    """What can be checked without the model: an editable stage, a cell of the right rank.
    (The cell's bounds need the sentence's tokens and the layer: :class:`LayerEdits` checks them.)"""
    for e in edits:
        if e.stage not in EDITABLE:
            raise InputError(f"cannot edit stage {e.stage!r} of a model's layer; editable: {', '.join(EDITABLE)}")
        if len(e.cell) != RANK[e.stage] or min(e.cell, default=0) < 0:
            raise InputError(f"edit of {e.stage}: cell {list(e.cell)} must be {RANK[e.stage]} indices ≥ 0")


class LayerEdits:
    """Edits checked against one layer's shapes; applied by :meth:`override`, :attr:`scores` and
    :meth:`mask`. Later edits of a cell win."""

    def __init__(self, edits: Iterable[Edit], shapes: Mapping[str, tuple[int, ...]]):
        self.edits = tuple(edits)
        for e in self.edits:
            check_edit(e, dict(shapes), editable=tuple(shapes))
        self._by_stage: dict[str, list[Edit]] = {}
        for e in self.edits:
            self._by_stage.setdefault(e.stage, []).append(e)
        self.scores = {e.cell: e.value for e in self._by_stage.get("scores", [])}  # (head, query, key) -> value

    def override(self, name: str, tensor: Tensor) -> Tensor:
        """``tensor`` with this stage's edited cells (a copy: the tensor read may be a cached state)."""
        cells = self._by_stage.get(name)
        if not cells:
            return tensor
        tensor = tensor.clone()
        for e in cells:
            tensor[e.cell] = e.value
        return tensor

    def mask(self, spec: pairs.MaskSpec, n: int) -> pairs.MaskSpec:
        """The layer's mask with the hidden/shown cells edited (unchanged without mask edits)."""
        cells = self._by_stage.get("mask")
        if not cells:
            return spec
        hidden = hidden_matrix(spec, n)
        for e in cells:
            hidden[e.cell] = bool(e.value)
        return pairs.MaskSpec(custom=hidden)


def hidden_matrix(spec: pairs.MaskSpec, n: int) -> np.ndarray:
    """``(n, n)`` bool, True where ``spec`` hides key j from query i."""
    rows = spec.rows(0, n, n, torch.device("cpu"))
    return np.zeros((n, n), bool) if rows is None else to_numpy(rows).copy()


def traced_hidden(config: Mapping, n: int, edits: Iterable[Edit] = ()) -> np.ndarray:
    """``(n, n)`` bool: the keys a traced layer hides (from its trace's ``config``: the mask, the pad
    positions, a sliding window shorter than the sentence), with the ``mask`` edits among ``edits``."""
    mode, window = config.get("mask"), config.get("sliding_window")
    pads = tuple(config.get("pad_positions") or ()) if mode != "none" else ()
    window = window if window is not None and window < n else None
    band = config.get("local_window")  # ModernBERT's two-sided window
    band = band if band is not None and band < n - 1 else None
    spec = pairs.MaskSpec(causal=mode == "causal", pads=pads, window=window, band=band)
    hidden = hidden_matrix(spec, n)
    for e in edits:
        if e.stage == "mask" and len(e.cell) == 2 and all(0 <= c < n for c in e.cell):
            hidden[e.cell] = bool(e.value)
    return hidden
