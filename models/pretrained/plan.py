"""How a model would be held, from its config.json alone: no weights read, none needed.

:func:`residency_from_config` builds the family's architecture on :class:`ShapeWeights` (every tensor
the family asks for is there, with the shape config.json implies, on the meta device) and asks its
:class:`~models.pretrained.layer_store.LayerStore` how its layers would be held in ``dtype`` within a
budget: an 8B-shape LLaMA in bfloat16 is resident on a 24 GB card, in float32 it streams 12 of its
32 layers per token. Optional tensors (biases a config does not name) are left out: a lower bound.
"""

from __future__ import annotations

import copy

import torch

from models.config import InputError
from models.memory import layer_budget
from models.pretrained.checkpoint import Checkpoint, Weights
from models.pretrained.layer_store import DTYPES, Residency


class ShapeWeights(Weights):
    """Meta weights with no checkpoint behind them: each tensor is sized by the shape asked for."""

    def __init__(self, model_type: str, dtype: torch.dtype = torch.float32) -> None:
        super().__init__(Checkpoint({}), {}, model_type, torch.device("cpu"), meta=True, dtype=dtype)
        self.layer_dtype = dtype

    def __contains__(self, name: str) -> bool:
        return False  # optional tensors are not counted

    def as_meta(self) -> Weights:
        twin = copy.copy(self)
        twin.taken, twin.held = [], []
        return twin

    def converting(self, dtype: torch.dtype) -> Weights:
        twin = self.as_meta()
        twin.dtype = dtype
        return twin

    def _sized(self, name: str, shape: tuple[int, ...], itemsize: int) -> torch.Tensor:
        if not shape:
            raise InputError(f"{self.model_type}: {name!r} is not sized by config.json")
        n = 1
        for s in shape:
            n *= s
        self.taken.append(n * itemsize)
        self.held.append(n * itemsize)
        return torch.empty(shape, device="meta")

    def take(self, name: str, *shape: int) -> torch.Tensor:
        return self._sized(name, shape, self.held_dtype(len(shape)).itemsize)

    def stored(self, name: str, *shape: int) -> torch.Tensor:
        return self._sized(name, shape, self.dtype.itemsize)


def residency_from_config(cfg: dict, dtype: str = "float32", budget: int | None = None,
                          device: str = "cpu", free: int | None = None) -> Residency:  # fmt: skip
    """How the layers of a model with config.json ``cfg`` would be held in ``dtype``: within
    ``budget`` bytes, or the budget of ``device`` (:func:`models.memory.layer_budget`:
    EXPLORER_LAYER_BUDGET, else the memory it has free, or ``free`` bytes: a 24 GB card's).
    ``.text`` says it as the status line does."""
    from models.pretrained.loader import ARCHITECTURES

    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    kind = ARCHITECTURES.get(cfg.get("model_type"))
    if kind is None:
        raise InputError(f"unsupported model_type {cfg.get('model_type')!r}")
    weights = ShapeWeights(cfg["model_type"], DTYPES[dtype])
    weights.dtype = torch.float32  # the embeddings and final norm, as the loader holds them
    arch = kind(cfg, weights)
    arch.layers.budget = layer_budget(device, free) if budget is None else budget
    return arch.layers.residency()
