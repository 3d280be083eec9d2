"""Projection weights: seeded random by default, or read from a ``.npz`` file (never pickles)."""

from __future__ import annotations

import os
import threading

import numpy as np
import torch

from models.checks import finite_float32
from models.config import AttentionConfig, AttentionWeights, InputError
from models.engine.host import to_numpy

REQUIRED = ("W_q", "W_k", "W_v")
OPTIONAL = ("W_o", "b_q", "b_k", "b_v", "b_o", "W_1", "W_2", "w", "W_g")


def _uniform(gen: torch.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    # Same bound as torch.nn.Linear's default init: U(-1/√fan_in, 1/√fan_in).
    bound = 1.0 / np.sqrt(fan_in)
    return to_numpy((torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1) * bound)


def random_weights(cfg: AttentionConfig) -> AttentionWeights:
    """Seeded uniform random weights. Drawn on the CPU so every device sees the same numbers.

    Only the weights ``cfg.score`` uses are made (see :func:`score_weight_names`).
    """
    h, d, dk, dv, do = cfg.heads, cfg.d_model, cfg.head_dim_k, cfg.head_dim_v, cfg.out_dim
    gen = torch.Generator().manual_seed(cfg.seed + 1)  # +1: not the embedding table's stream
    w = {
        "W_q": _uniform(gen, (h, d, dk), d),
        "W_k": _uniform(gen, (h, d, dk), d),
        "W_v": _uniform(gen, (h, d, dv), d),
        "W_o": _uniform(gen, (h * dv, do), h * dv),
    }
    if cfg.bias:
        w |= {
            "b_q": _uniform(gen, (h, dk), d),
            "b_k": _uniform(gen, (h, dk), d),
            "b_v": _uniform(gen, (h, dv), d),
            "b_o": _uniform(gen, (do,), h * dv),
        }
    # Score parameters are drawn in the order W_1, W_2, w, W_g (as they always were), but only
    # the score function's own are kept: W_1, W_2, w for additive, W_g for general. For general,
    # the unused W_1, W_2 and w are drawn and dropped at once so that W_g keeps its values.
    extra = {}
    if cfg.score == "additive":
        extra["W_1"] = _uniform(gen, (h, dk, dk), dk)
        extra["W_2"] = _uniform(gen, (h, dk, dk), dk)
        extra["w"] = _uniform(gen, (h, dk), dk)
    elif cfg.score == "general":
        for shape in ((h, dk, dk), (h, dk, dk), (h, dk)):
            torch.rand(shape, generator=gen, dtype=torch.float32)  # skipped: same stream as before
        extra["W_g"] = _uniform(gen, (h, dk, dk), dk)
    return AttentionWeights(**w, extra=extra)


_drawn: dict[tuple, AttentionWeights] = {}  # the last configuration's draw (seeded_weights)
_drawn_lock = threading.Lock()


def seeded_weights(cfg: AttentionConfig) -> AttentionWeights:
    """:func:`random_weights` for ``cfg``, drawn once for the last configuration asked: a toy change's
    run (models.engine.pipeline) and its layer's parameters for the inspector (models.reads.params.toy_params)
    share one draw (~5 ms at 8 heads × 512, drawn twice per change before). The arrays are shared: read them."""
    key = (cfg.heads, cfg.d_model, cfg.head_dim_k, cfg.head_dim_v, cfg.out_dim, cfg.bias, cfg.score, cfg.seed)
    with _drawn_lock:
        weights = _drawn.get(key)
        if weights is None:
            weights = random_weights(cfg)
            _drawn.clear()  # one configuration kept: the trace on screen holds its arrays anyway
            _drawn[key] = weights
        return weights


def score_weight_names(score: str) -> tuple[str, ...]:
    """The score parameters a score function reads."""
    return {"additive": ("W_1", "W_2", "w"), "general": ("W_g",)}.get(score, ())


def complete_weights(cfg: AttentionConfig, given: AttentionWeights) -> AttentionWeights:
    """Fill in what a weights file left out (W_o, score parameters) from the seeded defaults."""
    base = seeded_weights(cfg.replace(bias=False))
    return AttentionWeights(
        W_q=given.W_q,
        W_k=given.W_k,
        W_v=given.W_v,
        W_o=given.W_o if given.W_o is not None else base.W_o,
        b_q=given.b_q,
        b_k=given.b_k,
        b_v=given.b_v,
        b_o=given.b_o,
        extra={**base.extra, **given.extra},
    )


def expected_shapes(cfg: AttentionConfig) -> dict[str, tuple[int, ...]]:
    h, d, dk, dv, do = cfg.heads, cfg.d_model, cfg.head_dim_k, cfg.head_dim_v, cfg.out_dim
    return {
        "W_q": (h, d, dk), "W_k": (h, d, dk), "W_v": (h, d, dv), "W_o": (h * dv, do),
        "b_q": (h, dk), "b_k": (h, dk), "b_v": (h, dv), "b_o": (do,),
        "W_1": (h, dk, dk), "W_2": (h, dk, dk), "w": (h, dk), "W_g": (h, dk, dk),
    }  # fmt: skip


def load_weights(path: str | os.PathLike, cfg: AttentionConfig) -> AttentionWeights:
    """Read ``W_q, W_k, W_v`` (+ optional ``W_o``, biases, score parameters) from a ``.npz``.

    2-D projection matrices (and 1-D biases) are accepted for a single head. Any shape that
    disagrees with the configuration is an :class:`InputError` naming the array and both shapes.
    """
    return weights_from_arrays(read_weights_file(path), cfg, f"weights file {path}")


def read_weights_file(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of a weights ``.npz`` (models.io: checked before read, never unpickled)."""
    from models.io import load_array

    arrays = load_array(path, "weights file")
    if not isinstance(arrays, dict):  # a single-array .npy file
        raise InputError(f"weights file {path} is not a .npz archive (save it with numpy.savez)")
    return arrays


def weights_from_arrays(arrays: dict[str, np.ndarray], cfg: AttentionConfig, where: str,
                        complete: bool = True) -> AttentionWeights:  # fmt: skip
    """Check and complete weights already in memory (a session's), as :func:`load_weights` checks
    a file's; ``where`` names them in the messages ("weights file W.npz"). ``complete=False``: only
    checked (numpy alone; completing draws the missing ones with torch)."""
    missing = [k for k in REQUIRED if k not in arrays]
    if missing:
        raise InputError(f"{where} lacks {', '.join(missing)} (has {', '.join(arrays)})")
    unknown = sorted(set(arrays) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise InputError(f"{where} has unknown arrays: {', '.join(unknown)}")
    shapes = expected_shapes(cfg)
    checked: dict[str, np.ndarray] = {}
    for name, arr in arrays.items():
        if cfg.heads == 1 and name in ("W_q", "W_k", "W_v") and arr.ndim == 2:
            arr = arr[None]
        elif cfg.heads == 1 and name in ("b_q", "b_k", "b_v", "w") and arr.ndim == 1:
            arr = arr[None]
        elif cfg.heads == 1 and name in ("W_1", "W_2", "W_g") and arr.ndim == 2:
            arr = arr[None]
        if arr.shape != shapes[name]:
            raise InputError(
                f"{where}: {name} has shape {arr.shape}, expected {shapes[name]} "
                f"for heads={cfg.heads}, d_model={cfg.d_model}, d_k={cfg.head_dim_k}, "
                f"d_v={cfg.head_dim_v}, d_out={cfg.out_dim}"
            )
        checked[name] = finite_float32(arr, f"{where}: {name}")
    extra = {k: checked.pop(k) for k in ("W_1", "W_2", "w", "W_g") if k in checked}
    given = AttentionWeights(
        W_q=checked["W_q"], W_k=checked["W_k"], W_v=checked["W_v"], W_o=checked.get("W_o"),
        b_q=checked.get("b_q"), b_k=checked.get("b_k"), b_v=checked.get("b_v"),
        b_o=checked.get("b_o"), extra=extra,
    )  # fmt: skip
    return complete_weights(cfg, given) if complete else given


def save_weights(path: str | os.PathLike, weights: AttentionWeights) -> None:
    """Write weights in the format :func:`load_weights` reads (handy for tests and users)."""
    arrays = {k: getattr(weights, k) for k in ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")}
    arrays |= weights.extra
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
