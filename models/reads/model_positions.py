"""What a loaded model does with positions, for the positional-encoding lens (issue 44 item 10).

The lens drew the study notes' sinusoids (d = 32, columns 6–9 over 60 positions) whatever the model.
Now it shows the model's own: for a rotary model the angle ``i · θ_j`` of each rotated pair j at
each position i of the sentence (wrapped to (−π, π]), from the model's own ``inv_freq`` (head size,
rope_theta and rope scaling as loaded); for a model with learned positions the rows of its position
table the sentence's positions read (BART from offset 2, RoBERTa after its padding index). Duck-typed
on the loaded architecture (``rotary_table``/``rotary_tables``, ``position``/``wpe``), numpy out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.engine.host import to_numpy


@dataclass(frozen=True)
class ModelPositions:
    kind: str  # "rotary", "learned" or "none"
    n: int  # positions shown
    inv_freq: np.ndarray | None = None  # (pairs,) rotary: θ_j in radians per position
    angles: np.ndarray | None = None  # (n, pairs) rotary: i·θ_j wrapped to (−π, π]
    rows: np.ndarray | None = None  # (n, d) learned: the position table's rows for positions 0..n-1
    first_row: int = 0  # learned: the table row position 0 reads


def wrapped(angle: np.ndarray) -> np.ndarray:
    """Angles folded into (−π, π]."""
    folded = np.mod(angle + np.pi, 2 * np.pi) - np.pi  # [−π, π)
    return np.where(folded == -np.pi, np.pi, folded)


def _numpy(t) -> np.ndarray:
    return to_numpy(t).astype(np.float64) if hasattr(t, "detach") else np.asarray(t, dtype=np.float64)


def _rotary(arch):
    table = getattr(arch, "rotary_table", None)
    if table is None and isinstance(getattr(arch, "rotary_tables", None), dict) and arch.rotary_tables:
        tables = arch.rotary_tables
        table = tables.get("full_attention") or next(iter(tables.values()))  # the global layers' frequencies
    return table


def model_positions(arch, n: int) -> ModelPositions:
    """The positions of a loaded architecture for ``n`` tokens."""
    table = _rotary(arch)
    if table is not None and getattr(table, "inv_freq", None) is not None:
        inv_freq = _numpy(table.inv_freq)  # (pairs,)
        angles = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]  # (n, pairs)
        return ModelPositions("rotary", n, inv_freq=inv_freq, angles=wrapped(angles))
    learned = getattr(arch, "wpe", None)
    if learned is None:
        learned = getattr(arch, "position", None)
    if isinstance(learned, dict):  # encoder-decoder: one table a side; the encoder's reads the source
        learned = learned.get("encoder", next(iter(learned.values()), None))
    if learned is not None and hasattr(learned, "shape") and len(learned.shape) == 2:
        pad = getattr(arch, "padding_idx", None)
        first = pad + 1 if isinstance(pad, int) else int(getattr(arch, "position_offset", 0) or 0)
        rows = _numpy(learned[first : first + n])  # (≤ n, d)
        return ModelPositions("learned", rows.shape[0], rows=rows, first_row=first)
    return ModelPositions("none", n)


def cosine(rows: np.ndarray) -> np.ndarray:
    """``(n, n)`` cosine similarity between the rows (0 for a zero row)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit = rows / np.where(norms > 0, norms, 1.0)
    return unit @ unit.T


def shown_pairs(pairs: int, most: int = 6) -> list[int]:
    """A few frequency pairs spread from the fastest to the slowest."""
    if pairs <= most:
        return list(range(pairs))
    return sorted({int(round(k)) for k in np.linspace(0, pairs - 1, most)})
