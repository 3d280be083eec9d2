"""The ranges and choices of what to compute, written once.

Both readers take them from here: the option rows (:data:`models.fields.FIELDS`: ``Field.low`` /
``high`` / ``choices``, what ``export``, ``explain`` and a RunSpec's JSON accept) and the toy's
settings (:meth:`models.config.AttentionConfig.validate`, what the engine accepts).
``tests/models/test_limits_agree.py`` tries every bound ±1 and every choice on both.
"""

from __future__ import annotations

MASKS = ("none", "causal", "padding", "custom")
SCORES = ("dot", "scaled", "additive", "general")
POSITIONAL = ("none", "sinusoidal")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "bfloat16", "float16")  # --dtype: a model's layers below the traced one, generation
DEFAULT_MAX_TOKENS = 131072  # issue 34: the toy and decoders whose positions reach it; memory is checked first
MAX_SEED = 2**63 - 1  # torch.manual_seed takes 64 bits; the weights use seed + 1

# The integer settings: (lowest, highest) accepted, both included; None: unbounded that side.
RANGES: dict[str, tuple[int | None, int | None]] = {
    "heads": (1, None),
    "d_model": (1, None),
    "d_k": (1, None),
    "d_v": (1, None),
    "d_out": (1, None),
    "max_tokens": (1, None),
    "seed": (0, MAX_SEED),
    "layer": (0, None),
}
# The settings naming one of a few: the names accepted.
CHOICES: dict[str, tuple[str, ...]] = {
    "mask": MASKS,
    "score": SCORES,
    "pe": POSITIONAL,
    "device": DEVICES,
    "dtype": DTYPES,
}


def bounds(name: str) -> dict[str, int | None]:
    """``{"low": …, "high": …}`` of :data:`RANGES` ``[name]``: an option row's keywords."""
    low, high = RANGES[name]
    return {"low": low, "high": high}


def in_bounds(name: str, value: int) -> bool:
    low, high = RANGES[name]
    return (low is None or value >= low) and (high is None or value <= high)


def said(name: str) -> str:
    """What :data:`RANGES` ``[name]`` accepts, in words ("a positive integer", "an integer from 0 to …")."""
    low, high = RANGES[name]
    if high is None:
        return {1: "a positive integer", 0: "a non-negative integer"}.get(low, f"an integer of at least {low}")
    return f"an integer from {low} to {high}"


# The real settings that must be finite and above 0 (a row's ``low`` includes its bound, so no row
# says it: AttentionConfig.validate, which every reader of the rows runs, refuses 0, below and NaN).
POSITIVE = ("temperature",)
