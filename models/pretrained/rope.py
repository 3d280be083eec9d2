"""Rotary position embeddings (RoPE), full or partial, exactly as transformers computes them.

Shared by every rotary family (llama, mistral, qwen2/3, gemma/gemma2/gemma3, phi3, gpt_neox, ...).
Only the rope types reproduced exactly are accepted; any other (dynamic, longrope, ...) is refused
by name with the supported list, never approximated. "yarn" is reproduced by :func:`rotary` for
the families built on it (the LLaMA family, gpt-oss): it also scales cos and sin.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from models.checks import config_float, config_mapping, short
from models.config import InputError

ROPE_TYPES = ("default", "linear", "llama3")


def rope_params(cfg: dict) -> dict:
    """The rope settings of config.json in both layouts: transformers 5 (``rope_parameters``)
    and 4 (``rope_theta`` plus an optional ``rope_scaling``)."""
    params = config_mapping(cfg, "rope_parameters")
    if params and all(isinstance(v, dict) for v in params.values()):
        return {}  # per layer type (gemma3): the caller picks one
    scaling = dict(config_mapping(cfg, "rope_scaling"))
    if "type" in scaling:  # the older spelling
        scaling.setdefault("rope_type", scaling.pop("type"))
    return {**params, **scaling}  # rope_scaling wins, as in transformers


def _first_float(default: float | None, *places: tuple[dict, str]) -> float:
    """The first ``(mapping, name)`` present (not null), checked as a positive number;
    ``default`` None: one must be present."""
    for where, name in places:
        if where.get(name) is not None:
            return config_float(where, name, 1.0)
    if default is None:
        raise InputError(f"config.json lacks {places[-1][1]!r}")
    return default


def rope_base(default: float, *places: tuple[dict, str]) -> float:
    """The rope base: the first ``(mapping, name)`` not null, else ``default`` when config.json names
    none. A base given only as null is refused, as transformers refuses it (its frequencies
    ``1 / base ** ...`` fail on None), never taken for the default."""
    if any(where.get(name) is not None for where, name in places):
        return _first_float(None, *places)
    for where, name in places:
        if name in where:
            raise InputError(f"config.json: {name} is null; the rope base must be a positive number "
                             "(normally 10,000 or more)")  # fmt: skip
    return default


def rotary_dim(cfg: dict, head_dim: int, default_fraction: float = 1.0) -> int:
    """How many features of each head rotate: ``int(d_k · partial_rotary_factor)``."""
    params = rope_params(cfg)
    fraction = _first_float(
        default_fraction,
        (params, "partial_rotary_factor"),
        (cfg, "partial_rotary_factor"),
        (cfg, "rotary_pct"),
    )
    dim = int(head_dim * fraction)
    if dim < 2 or dim % 2 or dim > head_dim:
        raise InputError(
            f"config.json: {dim} rotary features per head of {head_dim} (must be even, ≥ 2 and "
            f"at most d_k)"
        )
    return dim


def rope_inv_freq(cfg: dict, dim: int, model_type: str, params: dict | None = None,
                  also: tuple[str, ...] = ()) -> Tensor:  # fmt: skip
    """The rotation speed of each pair of rotated features, ``(dim/2,)``; ``also``: the rope types
    the caller handles itself, named among the supported ones when refusing another."""
    params = rope_params(cfg) if params is None else params
    kind = params.get("rope_type", params.get("type", "default"))
    if not isinstance(kind, str) or kind not in ROPE_TYPES:
        raise InputError(
            f"{model_type} model: unsupported rope type {short(kind)} (it cannot be reproduced "
            f"exactly); supported: {', '.join(ROPE_TYPES + also)}"
        )
    base = rope_base(10000.0, (params, "rope_theta"), (cfg, "rope_theta"), (cfg, "rotary_emb_base"))

    def number(name: str) -> float:  # a required positive number of the rope parameters
        if params.get(name) is None:
            raise InputError(f"config.json: rope type {kind!r} needs {name!r} in its rope parameters")
        return config_float(params, name, 1.0)

    steps = torch.arange(0, dim, 2, dtype=torch.int64).float()
    inv_freq = 1.0 / (base ** (steps / dim))
    if kind == "linear":
        inv_freq = inv_freq / number("factor")
    elif kind == "llama3":
        factor = number("factor")
        low, high = number("low_freq_factor"), number("high_freq_factor")
        if high <= low:
            raise InputError(
                f"config.json: rope high_freq_factor {high} must exceed low_freq_factor {low}"
            )
        old_len = _first_float(
            None, (params, "original_max_position_embeddings"), (cfg, "max_position_embeddings")
        )
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, scaled)
    if not bool(torch.isfinite(inv_freq).all()):  # base ** x underflows to 0: 1/0
        raise InputError(
            f"config.json: the rope base (rope_theta) {base:g} is too small: the rotary frequencies "
            f"1/base^(2i/d) overflow float32 (a rope base is normally 10,000 or more)"
        )
    return inv_freq


def yarn(cfg: dict, dim: int, params: dict) -> tuple[Tensor, float]:
    """YaRN (rope type "yarn", gpt-oss): the inverse frequencies, interpolated by ``factor`` below a
    ramp between the ``beta_fast`` and ``beta_slow`` rotations, and the factor cos and sin are
    multiplied by (``attention_factor``, else ``0.1 · mscale · ln(factor) + 1``), as transformers'
    ``_compute_yarn_parameters``."""
    base = rope_base(10000.0, (params, "rope_theta"), (cfg, "rope_theta"))
    if params.get("original_max_position_embeddings") is None:
        raise InputError("config.json: rope type 'yarn' needs 'original_max_position_embeddings' in its "
                         "rope parameters")
    old_len = _first_float(None, (params, "original_max_position_embeddings"))
    factor = _first_float(config_float(cfg, "max_position_embeddings", 1.0) / old_len, (params, "factor"))

    def get_mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = params.get("attention_factor")
    if attention is not None:
        attention = config_float(params, "attention_factor", 1.0)
    elif params.get("mscale") and params.get("mscale_all_dim"):
        m, m_all = config_float(params, "mscale", 1.0), config_float(params, "mscale_all_dim", 1.0)
        attention = float(get_mscale(factor, m) / get_mscale(factor, m_all))
    else:
        attention = get_mscale(factor)
    beta_fast = _first_float(32.0, (params, "beta_fast"))
    beta_slow = _first_float(1.0, (params, "beta_slow"))
    truncate = params.get("truncate", True)
    if not isinstance(truncate, bool):
        raise InputError(f"config.json: rope truncate must be true or false, got {short(truncate)}")

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(old_len / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)
    extrapolation = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv_freq, attention


# The families whose YaRN rotary is checked against transformers (tests/models/test_pretrained_families_2.py);
# for the others it is refused by name, as every rope type not reproduced exactly.
YARN_CHECKED = ("llama", "gpt_oss")


def rotary(cfg: dict, dim: int, model_type: str, params: dict | None = None) -> Rotary:
    """The cos/sin tables of a family whose rope types include "yarn" (with its cos/sin factor),
    else exactly :func:`rope_inv_freq`'s."""
    params = rope_params(cfg) if params is None else params
    if model_type not in YARN_CHECKED:
        return Rotary(rope_inv_freq(cfg, dim, model_type, params))
    if params.get("rope_type", params.get("type")) == "yarn":
        return Rotary(*yarn(cfg, dim, params))
    return Rotary(rope_inv_freq(cfg, dim, model_type, params, also=("yarn",)))


class Rotary:
    """cos and sin tables of every (position, rotated feature), cached per sentence length;
    ``scale`` multiplies both (YaRN's attention factor). ``interleaved``: the angles repeat pairwise
    (θ0 θ0 θ1 θ1 …, Cohere) instead of in two halves (θ0 θ1 … θ0 θ1 …), matching the pairs
    :func:`apply_rope` rotates."""

    def __init__(self, inv_freq: Tensor, scale: float = 1.0, interleaved: bool = False) -> None:
        self.inv_freq = inv_freq
        self.scale = scale
        self.interleaved = interleaved
        self.dim = 2 * inv_freq.shape[0]
        self._cached: tuple[int, tuple[Tensor, Tensor]] | None = None

    def to(self, device: torch.device) -> Rotary:
        return Rotary(self.inv_freq.to(device), self.scale, self.interleaved)

    def __call__(self, n: int) -> tuple[Tensor, Tensor]:
        cached = self._cached  # one read: another thread may replace it meanwhile
        if cached is None or cached[0] != n:
            pos = torch.arange(n, device=self.inv_freq.device).float()
            freqs = pos[:, None] * self.inv_freq  # (n, dim/2)
            if self.interleaved:
                emb = torch.repeat_interleave(freqs, 2, dim=-1)  # (n, dim)
            else:
                emb = torch.cat((freqs, freqs), dim=-1)  # (n, dim)
            if not bool(torch.isfinite(emb).all()):
                raise InputError(
                    f"the rotary angles (position × frequency, up to {float(self.inv_freq.max()):.3g} per "
                    f"position) overflow float32 over {n} tokens: the rope base in config.json is too small"
                )
            cos, sin = emb.cos(), emb.sin()
            if self.scale != 1.0:
                cos, sin = cos * self.scale, sin * self.scale
            cached = self._cached = (n, (cos, sin))
        return cached[1]


def rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_pairs(x: Tensor) -> Tensor:
    """The interleaved form of :func:`rotate_half`: (x_2j, x_2j+1) -> (−x_2j+1, x_2j)."""
    return torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """Rotate each pair (x_j, x_{j+r/2}) (``interleaved``: (x_2j, x_2j+1)) of the first
    r = cos.shape[-1] features by the angle of the token's position; the other d_k − r features
    (partial rotary) pass unchanged."""
    turn = rotate_pairs if interleaved else rotate_half
    r = cos.shape[-1]
    if r == x.shape[-1]:
        return (x * cos) + (turn(x) * sin)
    rot, rest = x[..., :r], x[..., r:]
    return torch.cat(((rot * cos) + (turn(rot) * sin), rest), dim=-1)
