"""What a :class:`~models.engine.pairs.PairStore` computes from: Q, K, V and the layer's attention
:class:`~models.engine.attend.Variant` (the one description of the steps to the weights)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from models.engine.attend import Variant
from models.engine.masks import MaskSpec


@dataclass(frozen=True, eq=False)
class PairSpec:
    """Everything between Q, K, V and the head outputs, for ``h`` query heads.

    q (h, n_q, d_k) after any norm or rotation; k (kv, n_k, d_k); v (kv, n_k, d_v); query head i
    reads key/value head ``head_groups[i]``. ``variant``: the attention's facts (score kind, scale,
    soft-cap, temperature, mask, position bias, sinks); the properties below are views of it. With
    ``sinks`` (h,) (gpt-oss) every stage has one more key column, the last, "sink": the head's sink
    logit before the softmax (never scaled, capped or masked), its share of the softmax in the weights;
    it has no value row.
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    head_groups: tuple[int, ...]
    variant: Variant = Variant(scale=None)
    always_masked: bool = False  # a "masked" stage even when nothing is hidden (a model's own mask)
    # What-if edits of the raw scores, {(head, row, col): value}: later stages follow from them.
    score_edits: dict[tuple[int, int, int], float] | None = None
    label: str = ""  # where these stages are, for messages: "layer 3" (a model's), "" (the toy engine)
    largest_input: float | None = None  # the largest |input| (the toy engine's), for messages
    # The output matrix (h·d_v, d_out): with it, the value-weighted stage ``weighted_norms``.
    w_o: torch.Tensor | None = None
    # ``ready(head, values)``: called before a query head's q and k (and v, if ``values``) are read: a long
    # input's are projected head by head when first read (models.engine.projections); None: all are there.
    ready: Callable[[int, bool], None] | None = None

    # --- views of the variant (what the store and the long rows read) -----------------------------
    @property
    def mask(self) -> MaskSpec:
        return self.variant.mask

    @property
    def score(self) -> str:
        return self.variant.score

    @property
    def params(self) -> dict | None:
        return self.variant.score_params

    @property
    def scale(self) -> tuple[str, float] | None:
        """``("div", √d_k)``, ``("mul", factor)`` or None (no scaled stage)."""
        v = self.variant
        return None if v.scale is None else ("div" if v.divide else "mul", v.scale)

    @property
    def softcap(self) -> float | None:
        return self.variant.softcap

    @property
    def temperature(self) -> float:
        return self.variant.temperature

    @property
    def bias(self) -> torch.Tensor | None:
        return self.variant.bias

    @property
    def sinks(self) -> torch.Tensor | None:
        return self.variant.sinks

    @property
    def names(self) -> tuple[str, ...]:
        """The n×n stages this spec has, in order."""
        return tuple(
            n
            for n, present in (
                ("scores", True),
                ("scaled", self.scale is not None),
                ("biased", self.variant.biased),
                ("softcapped", self.softcap is not None),
                ("masked", self.mask.hides_anything or self.always_masked),
                ("weights", True),
                ("weighted_norms", self.w_o is not None),
            )
            if present
        )
