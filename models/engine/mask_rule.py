"""The one mask rule: which key positions j a query position i may not see (True = hidden).

Written once on index grids that may be numpy arrays or torch tensors (the operators are the same), so
the engine (:class:`models.engine.masks.MaskSpec`, :meth:`models.engine.attend.Variant.hidden`), the
reads (:mod:`models.reads.params`) and the window (the mask painter, Alt+click, the generation view,
which may not import torch) all hide the same cells. Positions, not indices: a block of rows
``q0..`` against keys ``k0..`` gets the cells of the whole matrix it is part of.
"""

from __future__ import annotations

import numpy as np


def rule(i, j, *, causal: bool = False, window: int | None = None, band: int | None = None):
    """``i (r, 1)``, ``j (1, c)`` query and key positions (numpy or torch) -> ``(r, c)`` bool:
    causal hides ``j > i``; a sliding window hides ``i − j ≥ window``; a two-sided local band hides
    ``|i − j| > band``."""
    d = i - j  # (r, c): how far back the key is
    hidden = d != d  # all False, of the grids' own kind and device
    if causal:
        hidden = hidden | (d < 0)
    if window is not None:
        hidden = hidden | (d >= window)
    if band is not None:
        hidden = hidden | (abs(d) > band)
    return hidden


def hidden_array(
    n_q: int,
    n_k: int,
    *,
    causal: bool = False,
    window: int | None = None,
    band: int | None = None,
    pads=(),
    custom: np.ndarray | None = None,
    q0: int = 0,
    k0: int = 0,
) -> np.ndarray:
    """``(n_q, n_k)`` numpy bool of queries ``q0..`` and keys ``k0..``: :func:`rule`, the pad key
    columns (hidden from every query) and a custom ``(n_q, n_k)`` mask OR'ed in."""
    i = np.arange(q0, q0 + n_q)[:, None]
    j = np.arange(k0, k0 + n_k)[None, :]
    hidden = rule(i, j, causal=causal, window=window, band=band)  # (n_q, n_k), its own array
    cols = [p - k0 for p in pads if k0 <= p < k0 + n_k]
    if cols:
        hidden[:, cols] = True
    if custom is not None:
        hidden |= np.asarray(custom, dtype=bool)
    return hidden
