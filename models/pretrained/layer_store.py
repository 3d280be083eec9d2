"""A model's layers read from its checkpoint on first use and kept as the device's memory allows.

:class:`LayerStore` keeps the layers that fit its budget counted from layer 0 (the pinned prefix)
and reads the rest on each pass; :class:`Residency` says which ("weights resident, 4.9 GB" / "12 of
32 layers read from disk per token"), for the status line, ``generate`` and the api.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch

from models.config import DTYPES as DTYPE_NAMES
from models.config import Cancelled, InputError
from models.memory import layer_budget
from models.pretrained.checkpoint import Weights, size_text


def amount(n: int) -> str:
    """``"4.9 GB"``, ``"87 MB"`` or ``"350 kB"``: decimal units, as a model's size is told."""
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


@dataclass(frozen=True)
class Residency:
    """How a model's layers are held: ``resident`` of ``layers`` stay once read (``resident_bytes``);
    ``per_pass`` are read from disk again on every pass over them (each generated token)."""

    layers: int
    resident: int
    resident_bytes: int
    dtype: str = "float32"  # what the layers are held (and computed) in: --dtype

    @property
    def per_pass(self) -> int:
        streamed = self.layers - self.resident
        return streamed if streamed > 1 else 0  # a single one stays in the store's slot

    @property
    def text(self) -> str:
        held = "" if self.dtype == "float32" else f" in {self.dtype}"
        if not self.per_pass:
            return f"weights resident{held}, {amount(self.resident_bytes)}"
        return (f"{self.per_pass} of {self.layers} layers read from disk per token "
                f"({self.resident} resident{held}, {amount(self.resident_bytes)})")  # fmt: skip


class LayerStore:
    """``store[i]``: block i's tensors (whatever ``load(i, weights)`` builds), read on first use.

    They are held in ``weights.layer_dtype`` (``--dtype``: float32, bfloat16 or float16) and handed out
    in float32 (the last layer asked for, read again from the checkpoint in float32: the held values cast
    up would be the rounded ones), except inside :meth:`computing`, where
    the blocks below a traced layer and generation run in that dtype (``torch.autocast``): the traced
    layer, the reads and anything else outside it see float32 weights, exactly as before.

    The layers that fit ``budget`` bytes together (their held sizes), counted from layer 0, stay once
    read: the pinned prefix. A layer beyond it is read when needed and kept only until the next such
    layer is (one slot), so a pass over every layer in order (a trace, each generated token) reads
    exactly the layers beyond the prefix and never evicts one it needs next: least-recently-used
    eviction under a cyclic visit hit nothing (issue 45). The budget comes from the memory the
    device has (:func:`models.memory.layer_budget`). :meth:`reading` reports progress in bytes for
    the layers about to be read and lets ``should_stop`` cancel between tensors.
    """

    def __init__(
        self,
        load: Callable[[int, Weights], dict],
        count: int,
        weights: Weights,
        budget: int | None = None,
    ) -> None:
        self.load, self.count, self.weights = load, count, weights
        self.dtype: torch.dtype = getattr(weights, "layer_dtype", torch.float32)
        self._local = threading.local()  # .computing: inside computing() on this thread
        self._float32: tuple[int, dict] | None = None  # the last layer handed out in float32
        self._budget = layer_budget(weights.device) if budget is None else budget
        self._cache: dict[int, dict] = {}  # the pinned layers read so far
        self._slot: tuple[int, dict] | None = None  # the last layer read beyond the prefix
        self._sums: list[int] = []  # _sums[i]: bytes of layers 0..i once read
        self._sizes: dict[int, int] = {}
        self._held: dict[int, int] = {}
        self._lock = threading.RLock()
        self.reads = 0  # layers read from disk (tests)

    def __len__(self) -> int:
        return self.count

    @property
    def budget(self) -> int:
        return self._budget

    @budget.setter
    def budget(self, value: int) -> None:
        """A new budget: the layers that no longer fit are let go (read again when needed)."""
        with self._lock:
            self._budget = value
            for i in [i for i in self._cache if not self.pinned(i)]:
                del self._cache[i]

    def stored_bytes(self, i: int) -> int:
        """The bytes layer ``i`` occupies on disk; checks its tensors without reading them."""
        if i not in self._sizes:
            meta = self._held_weights().as_meta()
            self.load(i, meta)
            self._sizes[i] = sum(meta.taken)
            self._held[i] = sum(meta.held)
        return self._sizes[i]

    def _held_weights(self) -> Weights:
        """The checkpoint's weights as this store holds them (its dtype)."""
        return self.weights if self.dtype == torch.float32 else self.weights.converting(self.dtype)

    def held_bytes(self, i: int) -> int:
        """The bytes layer ``i`` occupies once read (in its dtype); checks it without reading it."""
        self.stored_bytes(i)
        return self._held[i]

    def pinned(self, i: int) -> bool:
        """Whether layer ``i`` stays once read: layers 0..i fit the budget together. Checks the
        layers up to ``i`` only (a sharded checkpoint's later files are not opened)."""
        with self._lock:
            while len(self._sums) <= i:
                j = len(self._sums)
                self._sums.append((self._sums[-1] if j else 0) + self.held_bytes(j))
            return self._sums[i] <= self.budget

    def residency(self) -> Residency:
        """How the layers are held once every one has been read (sizes from the headers only)."""
        resident = 0
        while resident < self.count and self.pinned(resident):
            resident += 1
        return Residency(self.count, resident, self._sums[resident - 1] if resident else 0, dtype_name(self.dtype))

    def residency_text(self) -> str:
        """:meth:`residency` in words; "" while a shard holding some layer has not been opened yet
        (tracing layer 0 never touches the shards of later layers) or when a layer cannot be sized
        (a damaged shard, which the pass that reads it names)."""
        if not self.weights.ckpt.headers_read():
            return ""
        try:
            return self.residency().text
        except InputError:
            return ""

    def bytes_to_read(self, layers: Iterable[int]) -> int:
        """Memory that reading ``layers`` (those not in memory yet) adds at its peak: the
        float32 layers up to the budget plus the one being read."""
        todo = [i for i in dict.fromkeys(layers) if not self.cached(i)]
        sizes = [self.held_bytes(i) for i in todo]
        return min(sum(sizes), self.budget + max(sizes, default=0))

    def cached(self, i: int) -> bool:
        return i in self._cache or (self._slot is not None and self._slot[0] == i)

    @contextmanager
    def computing(self) -> Iterator[None]:
        """Inside, ``store[i]`` is the layer as held and torch computes in the store's dtype
        (``torch.autocast`` on the weights' device; float32: nothing changes). The blocks below a
        traced layer and generation's run here; never the traced layer."""
        low = self.dtype != torch.float32
        before = getattr(self._local, "computing", False)
        self._local.computing = low
        try:
            with torch.autocast(self.weights.device.type, dtype=self.dtype) if low else nullcontext():
                yield
        finally:
            self._local.computing = before

    def __getitem__(self, i: int) -> dict:
        if self.dtype == torch.float32 or getattr(self._local, "computing", False):
            return self._held_layer(i)
        with self._lock:  # the traced layer, the reads: the checkpoint's float32 values, not the held ones cast up
            if self._float32 is None or self._float32[0] != i:
                self._float32 = None
                self.stored_bytes(i)  # names and shapes checked before reading anything
                with self.weights.ckpt.reading():
                    self._float32 = (i, self.load(i, self.weights))
                self.reads += 1
            return self._float32[1]

    def _held_layer(self, i: int) -> dict:
        with self._lock:
            if i in self._cache:
                return self._cache[i]
            if self._slot is not None and self._slot[0] == i:
                return self._slot[1]
            self.stored_bytes(i)  # names and shapes checked before reading anything
            keep = self.pinned(i)
            if not keep:
                self._slot = None  # the slot's layer freed before the next one is read
            with self.weights.ckpt.reading():
                layer = self.load(i, self._held_weights())
            self.reads += 1
            if keep:
                self._cache[i] = layer
            else:
                self._slot = (i, layer)
            return layer

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._slot = self._float32 = None

    @contextmanager
    def reading(
        self,
        layers: Iterable[int],
        report: Callable[[float, str], None],
        should_stop: Callable[[], bool] | None = None,
        span: tuple[float, float] = (0.0, 1.0),
    ) -> Iterator[None]:
        """Report ``report(fraction, "Reading 1.2 / 2.2 GB")`` while ``layers`` are read inside
        the block; ``should_stop()`` (or the report itself) may raise :class:`Cancelled`."""
        with self._lock:
            todo = [i for i in dict.fromkeys(layers) if not self.cached(i)]
            total = sum(self.stored_bytes(i) for i in todo)
            if not total:
                yield
                return
            done = 0
            lo, hi = span

            def on_read(nbytes: int) -> None:
                nonlocal done
                done += nbytes
                if should_stop is not None and should_stop():
                    raise Cancelled("stopped while reading the weights")
                report(lo + (hi - lo) * min(done / total, 1.0), f"Reading {size_text(done, total)}")

            report(lo, f"Reading {size_text(0, total)}")
            self.weights.on_read = on_read
            try:
                yield
            finally:
                self.weights.on_read = None
            report(hi, f"Read {size_text(done, total).split(' / ')[1]} of weights")


DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}  # --dtype: "float32" -> torch.float32, ...


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def to_float32(value):
    """``value`` (a layer: dicts, tuples and lists of tensors) with every floating tensor in float32."""
    if isinstance(value, torch.Tensor):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, dict):
        return {k: to_float32(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(to_float32(v) for v in value)
    return value
