"""The one crossing from the device to the host: a tensor becomes numpy here and nowhere else in models/.

A trace may live on a GPU: ``tensor.numpy()`` there raises ``TypeError: can't convert cuda:0 device
type tensor to numpy`` (issue 45, reading Q, K or V of a long input), and numpy has no bfloat16. So
every read of numbers for the host goes through :func:`to_numpy`; tests/models/test_host_copies.py
forbids ``.numpy()`` and ``.cpu()`` anywhere else in models/. No torch import: the images' modules
(explorer.images), which must not import torch, read long stages through it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(t: Any, dtype: Any = None) -> np.ndarray:
    """Tensor ``t`` as numpy, whatever its device: detached, converted to ``dtype`` (a torch dtype) on
    its own device first (bfloat16 to float32 when none is asked, numpy having no bfloat16), then copied
    to the host (no copy for a CPU tensor already in that dtype: the array shares its memory)."""
    t = t.detach()
    if dtype is None and str(t.dtype) == "torch.bfloat16":
        t = t.float()
    elif dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    return t.cpu().numpy()


def to_host(t: Any) -> Any:
    """Tensor ``t`` on the CPU, still a tensor: for what must run there whatever the device (a draw
    from a CPU random generator, so that a seed gives the same tokens on every device)."""
    return t.detach().cpu()
