"""What a loaded model does with positions, for the positional-encoding lens (issue 44 item 10).

The lens drew the study notes' sinusoids (d = 32, columns 6–9 over 60 positions) whatever the model.
Now it shows the model's own: for a rotary model the angle ``i · θ_j`` of each rotated pair j at
each position i of the sentence (wrapped to (−π, π]), from the model's own ``inv_freq`` (head size,
rope_theta and rope scaling as loaded; one table per kind of layer when the kinds rotate with their
own bases, as Gemma 3's and ModernBERT's sliding and full layers); for a model with a position table
(learned, or Marian's fixed sinusoids) the rows the sentence's positions read (OPT and BART from
offset 2, RoBERTa after its padding index); for T5's relative buckets one plain sentence. Duck-typed
on the loaded architecture (``rotary_table``/``rotary_tables``, ``wpe``/``position``/``positions``,
``pe``), numpy out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.engine.host import to_numpy

FULL = "full_attention"  # the kind of layer whose frequencies the curves and the heatmap show


@dataclass(frozen=True)
class ModelPositions:
    kind: str  # "rotary", "learned", "sinusoidal" (a fixed table), "relative" (T5's buckets) or "none"
    n: int  # positions shown
    inv_freq: np.ndarray | None = None  # (pairs,) rotary: θ_j in radians per position (the full layers')
    angles: np.ndarray | None = None  # (n, pairs) rotary: i·θ_j wrapped to (−π, π]
    rows: np.ndarray | None = None  # (n, d) a table: its rows for positions 0..n-1
    first_row: int = 0  # a table: the row position 0 reads
    tables: dict[str, np.ndarray] = field(default_factory=dict)  # rotary: θ_j of each kind of layer
    unrotated: tuple[int, ...] = ()  # rotary: the layers that rotate nothing (SmolLM3's NoPE layers)
    about: str = ""  # relative: the buckets, in words


def wrapped(angle: np.ndarray) -> np.ndarray:
    """Angles folded into (−π, π]."""
    folded = np.mod(angle + np.pi, 2 * np.pi) - np.pi  # [−π, π)
    return np.where(folded == -np.pi, np.pi, folded)


def _numpy(t) -> np.ndarray:
    return to_numpy(t).astype(np.float64) if hasattr(t, "detach") else np.asarray(t, dtype=np.float64)


def _rotary_tables(arch) -> dict[str, np.ndarray]:
    """θ_j of each kind of layer ({"": θ} when every layer shares one table)."""
    many = getattr(arch, "rotary_tables", None)
    if isinstance(many, dict) and many:
        return {kind: _numpy(t.inv_freq) for kind, t in many.items() if getattr(t, "inv_freq", None) is not None}
    one = getattr(arch, "rotary_table", None)
    return {"": _numpy(one.inv_freq)} if getattr(one, "inv_freq", None) is not None else {}


def _table(arch):
    for name in ("wpe", "position", "positions"):  # GPT-2, BERT/BART/Marian, OPT
        table = getattr(arch, name, None)
        if isinstance(table, dict):  # encoder-decoder: one table a side; the encoder's reads the source
            table = table.get("encoder", next(iter(table.values()), None))
        if table is not None and hasattr(table, "shape") and len(table.shape) == 2:
            return table
    return None


def model_positions(arch, n: int) -> ModelPositions:
    """The positions of a loaded architecture for ``n`` tokens."""
    tables = _rotary_tables(arch)
    if tables:
        inv_freq = tables.get(FULL, next(iter(tables.values())))  # (pairs,) the global layers' frequencies
        angles = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]  # (n, pairs)
        flags = getattr(arch, "uses_rope", None) or ()
        return ModelPositions("rotary", n, inv_freq=inv_freq, angles=wrapped(angles),
                              tables=tables if len(tables) > 1 else {},
                              unrotated=tuple(i for i, rotates in enumerate(flags) if not rotates))  # fmt: skip
    table = _table(arch)
    if table is not None:
        pad = getattr(arch, "padding_idx", None)
        first = pad + 1 if isinstance(pad, int) else int(getattr(arch, "position_offset", 0) or 0)
        rows = _numpy(table[first : first + n])  # (≤ n, d)
        kind = "sinusoidal" if getattr(arch, "pe", "") == "sinusoidal" else "learned"
        return ModelPositions(kind, rows.shape[0], rows=rows, first_row=first)
    if getattr(arch, "pe", "") == "relative":
        buckets, far = getattr(arch, "buckets", "its"), getattr(arch, "max_distance", "a largest")
        return ModelPositions("relative", n, about=f"{buckets} buckets, distances from {far} on sharing the last")
    return ModelPositions("none", n)


def describe(mp: ModelPositions, name: str) -> str:
    """One or two plain sentences on what the lens shows for ``name``."""
    if mp.kind == "rotary":
        text = (f"{name} uses rotary positions: each pair j of a head's query and key features is turned by the "
                f"angle i·θ_j at position i. Shown: those angles for this sentence's {mp.n} positions.")  # fmt: skip
        if mp.tables:
            kinds = ", ".join(f"{k.replace('_', ' ')} layers θ_0 = {t[0]:.3g} … θ_{len(t) - 1} = {t[-1]:.3g}"
                              for k, t in mp.tables.items())  # fmt: skip
            text += f" Each kind of layer turns with its own frequencies ({kinds}); the angles are the full layers'."
        if mp.unrotated:
            text += f" Layers {', '.join(map(str, mp.unrotated))} turn nothing: they use no positions (NoPE)."
        return text
    if mp.kind == "learned":
        return (
            f"{name} uses learned positions: a trained row per position added to X. Shown: the rows its "
            f"{mp.n} positions read (table rows {mp.first_row}…{mp.first_row + mp.n - 1}) and how alike they are."
        )
    if mp.kind == "sinusoidal":
        return (
            f"{name} adds fixed sinusoidal position rows to X (not trained). Shown: the rows its {mp.n} "
            "positions read and how alike they are."
        )
    if mp.kind == "relative":
        return (
            f"{name} adds no position to the tokens: a learned bias per head and relative distance bucket "
            f"({mp.about}) is added to the scores (stage 'biased'). There is no position vector to show."
        )
    return f"{name} has no positional encoding of its own to show."


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
