"""Choosing where torch runs: CUDA when present and working, else the CPU."""

from __future__ import annotations

import functools

import torch


@functools.cache
def cuda_name() -> str | None:
    """The CUDA device's name if a tiny computation on it succeeds, else None."""
    if not torch.cuda.is_available():
        return None
    try:
        torch.ones(1, device="cuda").add_(1).item()
        return torch.cuda.get_device_name(0)
    except Exception:  # a broken driver must not take the app down: fall back to the CPU
        return None


def pick_device(preference: str = "auto") -> tuple[torch.device, str, str | None]:
    """Return ``(device, label, notice)``; ``notice`` explains a fallback from a CUDA request."""
    if preference in ("auto", "cuda"):
        name = cuda_name()
        if name is not None:
            return torch.device("cuda", 0), f"cuda:0 ({name})", None
        if preference == "cuda":
            return torch.device("cpu"), "cpu", "CUDA was requested but is not available; used the CPU"
    return torch.device("cpu"), "cpu", None


def describe_default_device() -> str:
    return pick_device("auto")[1]
