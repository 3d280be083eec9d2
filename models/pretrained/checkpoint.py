"""Read a checkpoint tensor by tensor, only what is needed, one layer at a time.

A :class:`Checkpoint` knows where every tensor lives (the single file's header, or a sharded
checkpoint's index ``weight_map``) and opens a file only when one of its tensors is wanted, so
tracing layer 0 of a sharded model never touches the shards holding later layers. safetensors
files are memory-mapped while a layer is read and closed afterwards: the pages of the stored
(bf16/fp16) tensors do not stay resident once converted to float32.

:class:`Weights` hands tensors out as float32 (a model's layers: its ``--dtype``) on the model's
device, checking names, shapes and dtypes first (a "meta" twin checks and sizes a layer without
reading it). Layers are read and held by :class:`models.pretrained.layer_store.LayerStore`.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import torch
from safetensors import safe_open
from torch import Tensor

from models.config import Cancelled, InputError
from models.io import check_regular
from models.memory import available_bytes, human, is_out_of_memory

FLOAT_DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
OTHER_DTYPES = {"I8": 1, "U8": 1, "BOOL": 1, "I16": 2, "I32": 4, "I64": 8}


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def size_text(done: int, total: int) -> str:
    """``"1.2 / 2.2 GB"`` (or MB for smaller totals)."""
    unit, div = ("GB", 1e9) if total >= 1e9 else ("MB", 1e6)
    return f"{done / div:.1f} / {total / div:.1f} {unit}"


class Checkpoint:
    """The tensors of one checkpoint: ``keys`` maps each stored key to the file holding it."""

    def __init__(self, keys: dict[str, Path]) -> None:
        self.keys = keys
        self._infos: dict[Path, dict[str, tuple[tuple[int, ...], str, int]]] = {}
        self._open: dict[Path, object] = {}  # files open during reading()
        self._bins: dict[Path, dict[str, Tensor]] = {}  # pytorch_model.bin files, memory-mapped
        self.opened: list[Path] = []  # every file opened, in order (tests check the shards read)
        self._lock = threading.RLock()

    @classmethod
    def from_files(cls, files: list[Path], weight_map: dict[str, str] | None) -> Checkpoint:
        for path in files:
            if not path.exists():
                raise InputError(f"missing weights file {path}")
            check_regular(path, "weights file")  # a FIFO shard is named as one (issue 36)
        if weight_map is not None:
            folder = files[0].parent
            return cls({k: folder / f for k, f in weight_map.items()})
        ckpt = cls({})
        (path,) = files
        ckpt.keys = dict.fromkeys(ckpt._info(path), path)
        return ckpt

    # --- files -----------------------------------------------------------------------------
    def _fail(self, path: Path, e: Exception) -> InputError:
        if is_out_of_memory(e):  # safetensors maps the whole file: under a memory cap (ulimit -v) that
            # can fail however few tensors are read (issue 36: it was "truncated or corrupt?")
            with suppress(OSError):
                size, left = human(path.stat().st_size), human(available_bytes())
                return InputError(f"{path.name} ({size}) could not be mapped into memory: {first_line(e)}; only "
                                  f"{left} is left under the memory limit; use a smaller model")  # fmt: skip
        return InputError(f"could not read {path.name} (truncated or corrupt?): {first_line(e)}")

    def _info(self, path: Path) -> dict[str, tuple[tuple[int, ...], str, int]]:
        """``{key: (shape, dtype, nbytes)}`` of one file, from its header (data not read)."""
        with self._lock:
            if path in self._infos:
                return self._infos[path]
            info = {}
            try:
                if path.suffix == ".safetensors":
                    self.opened.append(path)
                    with safe_open(str(path), framework="pt", device="cpu") as f:
                        for k in f.keys():
                            s = f.get_slice(k)
                            shape, dtype = tuple(s.get_shape()), s.get_dtype()
                            size = {**FLOAT_DTYPES, **OTHER_DTYPES}.get(dtype, 1)
                            info[k] = (shape, dtype, size * _numel(shape))
                else:
                    for k, t in self._bin(path).items():
                        dtype = str(t.dtype).removeprefix("torch.")
                        float_name = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}
                        info[k] = (tuple(t.shape), float_name.get(dtype, dtype), t.nbytes)
            except (Cancelled, InputError):
                raise
            except Exception as e:  # SafetensorError, OSError, ...
                raise self._fail(path, e) from e
            self._infos[path] = info
            return info

    def _bin(self, path: Path) -> dict[str, Tensor]:
        if path not in self._bins:
            self.opened.append(path)
            try:  # memory-mapped: only the tensors taken are ever paged in
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:  # the legacy (non-zip) format cannot be mapped
                state = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
                raise InputError(f"{path.name} does not hold a plain dict of tensors")
            self._bins[path] = state
        return self._bins[path]

    def info(self, key: str) -> tuple[tuple[int, ...], str, int]:
        path = self.keys[key]
        info = self._info(path)
        if key not in info:
            raise InputError(f"{path.name} lacks tensor {key!r} although the index lists it there")
        return info[key]

    def headers_read(self) -> bool:
        """Whether every file's header has been read (a sharded checkpoint opens a shard's only when
        one of its tensors is first wanted)."""
        return all(path in self._infos or path in self._bins for path in set(self.keys.values()))

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Keep the files opened meanwhile open, and close them all at the end."""
        with self._lock:
            try:
                yield
            finally:
                handles, self._open = self._open, {}
                for f in handles.values():
                    with suppress(Exception):
                        f.__exit__(None, None, None)

    def read(self, key: str) -> Tensor:
        """One tensor, on the CPU, in its stored dtype (memory-mapped while reading())."""
        path = self.keys[key]
        with self._lock:
            try:
                if path.suffix != ".safetensors":
                    return self._bin(path)[key]
                if path not in self._open:
                    self.opened.append(path)
                    handle = safe_open(str(path), framework="pt", device="cpu")
                    self._open[path] = handle.__enter__()
                return self._open[path].get_tensor(key)
            except (Cancelled, InputError):
                raise
            except Exception as e:
                raise self._fail(path, e) from e


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class Weights:
    """The base model's tensors by name (prefix removed), handed out as float32 on ``device``.

    A missing or misshapen tensor means the folder is not the checkpoint config.json describes:
    a one-line :class:`InputError`, not a torch shape error deep inside a forward pass. With
    ``meta`` set nothing is read: tensors come back on the meta device (shapes only) and
    :attr:`taken` lists their stored sizes, which is how a layer is checked and sized before
    it is read.
    """

    def __init__(
        self,
        ckpt: Checkpoint,
        names: dict[str, str],
        model_type: str,
        device: torch.device,
        meta: bool = False,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.ckpt = ckpt
        self.names = names  # name without the base model's prefix -> stored key
        self.model_type = model_type
        self.device = device
        self.meta = meta
        self.dtype = dtype  # what take() converts to: float32, or the layers' --dtype (LayerStore)
        self.layer_dtype = torch.float32  # what the model's LayerStore holds its layers in (--dtype)
        self.taken: list[int] = []  # stored bytes of each tensor taken (meta)
        self.held: list[int] = []  # bytes each tensor taken occupies once read (meta)
        self.on_read: Callable[[int], None] | None = None  # called with each tensor's bytes

    def as_meta(self) -> Weights:
        return Weights(self.ckpt, self.names, self.model_type, self.device, meta=True, dtype=self.dtype)

    def converting(self, dtype: torch.dtype) -> Weights:
        """These weights (the same checkpoint, progress callback and device) handed out in ``dtype``."""
        twin = copy.copy(self)
        twin.dtype = dtype
        return twin

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def _check(self, name: str, shape: tuple[int, ...]) -> str:
        if name not in self.names:
            raise InputError(
                f"the weights have no tensor {name!r}; is this really a {self.model_type} model?"
            )
        key = self.names[name]
        stored, dtype, nbytes = self.ckpt.info(key)
        if shape and stored != shape:
            raise InputError(
                f"tensor {name!r} has shape {stored} but config.json implies {shape}"
            )
        if dtype not in FLOAT_DTYPES:
            raise InputError(f"tensor {name!r} holds {dtype}, not floating-point weights")
        if self.meta:
            self.taken.append(nbytes)
        return key

    def stored(self, name: str, *shape: int) -> Tensor:
        """The tensor as stored (bf16 stays bf16) on the device, e.g. a big embedding matrix
        whose rows are converted only when looked up."""
        key = self._check(name, shape)
        if self.meta:
            stored, dtype, nbytes = self.ckpt.info(key)
            self.held.append(_numel(stored) * 4 if dtype == "F64" else nbytes)
            return torch.empty(stored, device="meta")
        t = self.ckpt.read(key)
        # float64 has no use beyond float32 here, and its values must fit float32 (checked below)
        out = t.to(self.device, dtype=torch.float32 if t.dtype == torch.float64 else t.dtype)
        if out.data_ptr() == t.data_ptr():  # never keep the file's memory map
            out = out.clone()
        if self.on_read is not None:
            self.on_read(t.nbytes)
        return finite_tensor(out, name)

    def table(self, name: str, *shape: int, converted: bool = False):
        """A token embedding (or output) matrix ``(vocab, d)``: a GGUF file's is read by rows when looked up
        (``models.pretrained.gguf_model.RowTable``: never dequantized whole for a lookup); any other
        checkpoint's is read whole, as stored (:meth:`stored`) or ``converted`` (:meth:`take`)."""
        if not self.meta and getattr(self.ckpt, "reads_rows", False):
            return self.ckpt.table(self._check(name, shape), name, self.device)
        return self.take(name, *shape) if converted else self.stored(name, *shape)

    def take(self, name: str, *shape: int) -> Tensor:
        key = self._check(name, shape)
        if self.meta:
            stored = self.ckpt.info(key)[0]
            self.held.append(_numel(stored) * self.held_dtype(len(stored)).itemsize)
            return torch.empty(stored, device="meta")
        t = self.ckpt.read(key)
        out = t.to(device=self.device, dtype=self.held_dtype(t.dim()))
        if out.data_ptr() == t.data_ptr():  # never keep the file's memory map
            out = out.clone()
        if self.on_read is not None:
            self.on_read(t.nbytes)
        return finite_tensor(out, name)

    def held_dtype(self, dims: int) -> torch.dtype:
        """A matrix's dtype once read: :attr:`dtype`; a vector's (norms, biases, sinks) float32 always:
        a few bytes, and ops outside torch.autocast's casts (layer_norm) take them with float32 inputs."""
        return self.dtype if dims >= 2 else torch.float32

    def optional(self, name: str, *shape: int) -> Tensor | None:
        return self.take(name, *shape) if name in self.names else None


def finite_tensor(t: Tensor, name: str) -> Tensor:
    """A checkpoint tensor (after its conversion) without NaN or ±inf, else a one-line refusal
    naming it: a float64 value beyond float32's range has become inf by then.

    One NaN or infinity makes the sum NaN or infinite, whatever the order of the additions, so a
    finite sum clears the tensor in one pass that allocates nothing (MiniLM: 1.2 ms for its word
    embeddings against 38 ms for ``isfinite(t).all()``, two thirds of its whole load before). A sum
    that overflows though every value is finite (fp16) falls back to the element-wise check."""
    if t.numel() == 0 or bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all()):
        return t
    index = tuple(int(i) for i in (~torch.isfinite(t)).nonzero()[0])
    raise InputError(
        f"tensor {name!r} of the checkpoint holds {float(t[index])!r} at {list(index)} "
        f"(NaN, infinite, or beyond float32's range); the weights are corrupt"
    )
