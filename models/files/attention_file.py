"""Bring your own attention: open weights computed anywhere, no model needed.

Accepted: a ``.npy`` or ``.npz`` (never unpickled) holding an array shaped ``(L, h, n_q, n_k)``,
``(h, n_q, n_k)`` or ``(n_q, n_k)``, with optional ``tokens`` (or ``query_tokens`` and
``key_tokens``) arrays of strings in the ``.npz``; or a folder written by
``export --all-layers`` (or a single-layer ``export`` folder, its ``weights.npy``).

Anything that cannot be read, or has the wrong number of axes, raises a one-line
:class:`InputError`, and so do NaN or infinite values (refused as any matrix a user gives is:
issue 36, they made the window's rollout fail with a traceback). Values that are not proper
attention weights (negative, rows not summing to 1 within ``ROW_SUM_TOLERANCE``) open anyway,
with one-line warnings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.checks import finite_float32
from models.config import InputError
from models.engine.mask_rule import hidden_array
from models.io import load_array, read_json, read_npy

ROW_SUM_TOLERANCE = 1e-3
ARRAY_KEYS = ("attention", "attentions", "weights", "attn")
TOKEN_KEYS = ("tokens", "query_tokens", "key_tokens")


@dataclass
class AttentionFile:
    weights: np.ndarray  # (L, h, n_q, n_k) float32
    query_tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    source: str
    warnings: list[str] = field(default_factory=list)
    decoder: bool = False  # causal weights (or a decoder's export): the first token is special
    cross: bool = False  # queries and keys from two sequences (a cross block's export): no rollout


def _load(path: Path):
    """An array, or ``{key: array}`` for a ``.npz`` (whatever its name says): models.io."""
    return load_array(path, "attention file")


def _from_archive(arrays: dict[str, np.ndarray], path: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    names = list(arrays)
    key = next((k for k in ARRAY_KEYS if k in arrays), None)
    if key is None:
        others = [k for k in names if k not in TOKEN_KEYS]
        if len(others) != 1:
            listed = ", ".join(names) or "nothing"
            raise InputError(f"{path.name} holds {listed}; name the attention array one of {', '.join(ARRAY_KEYS)}")
        key = others[0]
    return arrays[key], {k: arrays[k] for k in TOKEN_KEYS if k in arrays}


def _from_folder(folder: Path) -> tuple[np.ndarray, dict, dict]:
    manifest = {}
    if (folder / "manifest.json").exists():
        manifest = read_json(folder / "manifest.json", "manifest")
    for name in ("attention.npy", "weights.npy"):  # --all-layers, or a single-layer export
        if (folder / name).exists():
            array = read_npy(folder / name, "attention file")
            break
    else:
        raise InputError(f"{folder} has neither attention.npy (export --all-layers) nor weights.npy")
    tokens = {}
    for key in TOKEN_KEYS:
        value = manifest.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise InputError(f"{folder / 'manifest.json'}: {key} must be a list of strings")
        tokens[key] = np.array(value, dtype=str) if value else np.array([], dtype=str)
    if "decoder" in manifest and not isinstance(manifest["decoder"], bool):
        raise InputError(f"{folder / 'manifest.json'}: decoder must be true or false, got {manifest['decoder']!r:.40}")
    if name == "weights.npy":  # a stage's own key labels (a learned sink's column) win
        listed = manifest.get("stages") if isinstance(manifest.get("stages"), list) else []
        entry = next((s for s in listed if isinstance(s, dict) and s.get("name") == "weights"), {})
        if isinstance(entry.get("col_labels"), list):
            tokens["key_tokens"] = np.array(entry["col_labels"], dtype=str)
    return array, tokens, manifest


def _labels(tokens: dict, key: str, n: int, warnings: list[str]) -> tuple[str, ...]:
    if key not in tokens:
        key = "tokens"
    given = tokens.get(key)
    if given is None:
        return tuple(str(i) for i in range(n))
    given = np.asarray(given)
    if given.dtype.kind not in "US" or given.size > 1 << 24:
        warnings.append(f"{key} holds {given.dtype}, not strings: positions shown as numbers")
        return tuple(str(i) for i in range(n))
    labels = [t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t) for t in given.reshape(-1)]
    if len(labels) != n:
        warnings.append(f"{len(labels)} {key} for {n} positions: positions shown as numbers")
        return tuple(str(i) for i in range(n))
    return tuple(labels)


def check_weights(weights: np.ndarray) -> list[str]:
    """One-line warnings about values that are not attention weights (layer by layer)."""
    negative = off_rows = rows = 0
    example = ""
    for layer, a in enumerate(weights):
        negative += int((a < 0).sum())
        sums = a.sum(-1, dtype=np.float64)  # (h, n_q)
        off = ~(np.abs(sums - 1.0) <= ROW_SUM_TOLERANCE)
        rows += sums.size
        if off.any() and not example:
            h, i = np.argwhere(off)[0]
            example = f" (e.g. layer {layer}, head {h}, row {i} sums to {sums[h, i]:.6g})"
        off_rows += int(off.sum())
    warnings = []
    if negative:
        warnings.append(f"{negative} values are negative: not softmax weights")
    if off_rows:
        warnings.append(f"{off_rows} of {rows} rows do not sum to 1 within {ROW_SUM_TOLERANCE:g}{example}")
    return warnings


def open_attention(path: str | os.PathLike) -> AttentionFile:
    """Read ``path`` (see the module docstring); InputError (one line) when it cannot be used."""
    path = Path(path).expanduser()
    manifest: dict = {}
    if path.is_dir():
        array, tokens, manifest = _from_folder(path)
    elif not path.exists():
        raise InputError(f"attention file not found: {path}")
    else:
        loaded = _load(path)
        array, tokens = (loaded, {}) if isinstance(loaded, np.ndarray) else _from_archive(loaded, path)
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        raise InputError(f"{path.name}: attention must hold numbers, got {array.dtype}")
    if array.ndim not in (2, 3, 4):
        raise InputError(
            f"{path.name}: attention of shape {array.shape} has {array.ndim} axes; "
            "expected (L, h, n_q, n_k), (h, n_q, n_k) or (n_q, n_k)"
        )
    if 0 in array.shape:
        raise InputError(f"{path.name}: attention of shape {array.shape} is empty")
    weights = finite_float32(array, f"attention file {path.name}").reshape((1,) * (4 - array.ndim) + array.shape)
    n_q, n_k = weights.shape[-2:]
    warnings: list[str] = []
    query = _labels(tokens, "query_tokens", n_q, warnings)
    key = _labels(tokens, "key_tokens", n_k, warnings)
    warnings = list(dict.fromkeys(warnings))  # one "tokens" list may serve both axes
    warnings += check_weights(weights)
    if "decoder" in manifest:
        decoder = bool(manifest["decoder"])
    else:  # nothing above the diagonal anywhere: causal weights, as a decoder's
        decoder = n_q == n_k > 1 and not np.any(hidden_array(n_q, n_k, causal=True) & (weights != 0))
    # Cross-attention: an encoder-decoder's cross block, or query and key tokens named apart and unequal.
    cross = manifest.get("block") == "cross" or (
        "query_tokens" in tokens and "key_tokens" in tokens and tuple(query) != tuple(key))
    return AttentionFile(weights, query, key, str(path), warnings, bool(decoder), bool(cross))
