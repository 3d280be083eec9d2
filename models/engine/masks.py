"""The one mask builder: which keys each query may not see, built only for the rows asked for.

The toy engine, a model's traced layer (:mod:`models.engine.pairs`) and the layers below it
(:func:`models.pretrained.common.hidden_mask`) all build their masks here, by the one rule of
:mod:`models.engine.mask_rule`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from models.engine.mask_rule import rule


@dataclass(frozen=True, eq=False)
class MaskSpec:
    """Which keys each query may not see; ``rows()`` builds only the rows asked for."""

    causal: bool = False
    pads: tuple[int, ...] = ()  # key positions hidden from every query
    window: int | None = None  # sliding window: query i sees keys i − window < j ≤ i
    custom: np.ndarray | None = None  # (n_q, n_k) bool, True = hidden
    band: int | None = None  # two-sided local window: query i sees keys |i − j| ≤ band

    @property
    def hides_anything(self) -> bool:
        return (self.causal or bool(self.pads) or self.window is not None or self.custom is not None
                or self.band is not None)  # fmt: skip

    def visible_columns(self, r0: int, r1: int, n_k: int) -> tuple[int, int]:
        """Keys ``c0:c1`` outside which every key is hidden from queries ``r0:r1`` (causal: nothing
        after the last query; sliding window: nothing before the first query's window)."""
        c0, c1 = 0, n_k
        if self.causal:
            c1 = min(n_k, r1)
        if self.window is not None:
            c0 = min(c1, max(0, r0 - self.window + 1))
        if self.band is not None:
            c0, c1 = max(c0, min(c1, r0 - self.band)), min(c1, max(c0, r1 + self.band))
        return c0, c1

    def hidden_span(self, r0: int, r1: int, c0: int, c1: int) -> tuple[int, int]:
        """Keys ``h0:h1`` (within ``c0:c1``) outside which nothing is hidden from queries ``r0:r1``:
        under a causal mask alone only keys after the first query can be (the block's diagonal
        square), so the mask is built and applied there only."""
        if self.pads or self.custom is not None or self.window is not None or self.band is not None:
            return c0, c1
        if self.causal:
            return min(c1, max(c0, r0 + 1)), c1
        return c1, c1

    def rows(self, r0: int, r1: int, n_k: int, device: torch.device, c0: int = 0,
             c1: int | None = None) -> torch.Tensor | None:  # fmt: skip
        """``(r1 − r0, c1 − c0)`` bool, True where query i may not see key j; None when nothing is hidden."""
        if not self.hides_anything:
            return None
        c1 = n_k if c1 is None else c1
        i = torch.arange(r0, r1, device=device)[:, None]  # (r, 1)
        j = torch.arange(c0, c1, device=device)[None, :]  # (1, c)
        hidden = rule(i, j, causal=self.causal, window=self.window, band=self.band)  # (r, c), its own tensor
        if self.pads:
            pads = [p - c0 for p in self.pads if c0 <= p < c1]
            hidden[:, pads] = True
        if self.custom is not None:
            hidden |= torch.as_tensor(np.asarray(self.custom[r0:r1, c0:c1], dtype=bool), device=device)
        return hidden
