"""Read a GGUF file (llama.cpp's format: Ollama, LM Studio, GPT4All keep their models so): its metadata
and tensor table from the header, and each tensor's data from a memory map, only when asked.

The header is parsed here with ``struct`` rather than ``gguf.GGUFReader``: the reader builds a numpy
view for every string of the vocabulary (SmolLM2-135M: 49,152 tokens and 48,900 merges), 4.5 s where
this takes 0.15 s. The data stays with ``gguf`` (the format's own package): the quantization types and
their block sizes (``GGML_QUANT_SIZES``) and the dequantization (``gguf.quants.dequantize``), to float32.
Only the tensors asked for are paged in and dequantized, so a 7B Q4 file is never dequantized whole.

Torch-free; every problem with the file is one :class:`InputError` line naming it.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.config import InputError
from models.io import check_regular

MAGIC = b"GGUF"
VERSIONS = (2, 3)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
# the string arrays read in full (a tokenizer's); any other is left as its length
STRING_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # torch order (ggml lists the fastest-moving dimension first)
    ggml_type: int
    offset: int  # from the start of the file
    nbytes: int  # stored

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


class _Blob:
    """Bounds-checked reads from the file's bytes: a short or corrupt header is an error line, never an
    IndexError or a gigantic allocation."""

    def __init__(self, data: mmap.mmap, path: Path) -> None:
        self.data, self.path, self.pos = data, path, 0

    def fail(self, what: str) -> InputError:
        return InputError(f"could not read {self.path.name} (truncated or corrupt GGUF file?): {what}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"{n} bytes wanted at offset {self.pos} of {len(self.data)}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise self.fail(f"{size} bytes wanted at offset {self.pos} of {len(self.data)}")
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out

    def string(self) -> str:
        (n,) = self.unpack("<Q")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"a string that is not UTF-8 at offset {self.pos - n}") from e

    def skip_string(self) -> None:
        (n,) = self.unpack("<Q")
        if self.pos + n > len(self.data):
            raise self.fail("a string runs past the end of the file")
        self.pos += n

    def value(self, kind: int, keep_strings: bool):
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])[0]
        if kind == 8:
            return self.string()
        if kind != 9:
            raise self.fail(f"unknown metadata value type {kind}")
        item, count = self.unpack("<IQ")
        if count > len(self.data):
            raise self.fail(f"an array of {count} values in a file of {len(self.data)} bytes")
        if item in _SCALARS:
            fmt = _SCALARS[item]
            size = struct.calcsize(fmt)
            raw = self.take(size * count)
            return list(struct.unpack(f"<{count}{fmt[1]}", raw))
        if item != 8:
            raise self.fail(f"an array of value type {item}")
        if keep_strings:
            return [self.string() for _ in range(count)]
        for _ in range(count):
            self.skip_string()
        return count


def _type_sizes() -> dict[int, tuple[int, int]]:
    from gguf import GGML_QUANT_SIZES

    return {int(t): sizes for t, sizes in GGML_QUANT_SIZES.items()}


class GGUFFile:
    """A GGUF file's ``metadata`` and ``tensors`` (by name), and :meth:`read` of one tensor as float32."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        check_regular(self.path, "GGUF file")
        try:
            with open(self.path, "rb") as fh:
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:  # ValueError: an empty file cannot be mapped
            raise InputError(f"could not read {self.path.name}: {e}") from e
        try:
            self._parse(_Blob(data, self.path))
        finally:
            data.close()  # nothing stays mapped: each read() maps the file again

    def _parse(self, blob: _Blob) -> None:
        data = blob.data
        if blob.take(4) != MAGIC:
            raise InputError(f"{self.path.name} is not a GGUF file (it does not start with 'GGUF')")
        version, n_tensors, n_kv = blob.unpack("<IQQ")
        if version not in VERSIONS:
            raise InputError(f"{self.path.name} is GGUF version {version}; readable: {', '.join(map(str, VERSIONS))}")
        if n_tensors > len(data) or n_kv > len(data):
            raise blob.fail(f"{n_tensors} tensors and {n_kv} metadata keys in {len(data)} bytes")
        self.metadata: dict = {}
        for _ in range(n_kv):
            key = blob.string()
            (kind,) = blob.unpack("<I")
            self.metadata[key] = blob.value(kind, key in STRING_ARRAYS)
        sizes = _type_sizes()
        table = []
        for _ in range(n_tensors):
            name = blob.string()
            (n_dims,) = blob.unpack("<I")
            if n_dims > 8:
                raise blob.fail(f"tensor {name!r} has {n_dims} dimensions")
            dims = blob.unpack(f"<{n_dims}Q")
            ggml_type, offset = blob.unpack("<IQ")
            table.append((name, tuple(reversed(dims)), ggml_type, offset))
        align = self.metadata.get("general.alignment", 32)
        if not isinstance(align, int) or align <= 0:
            raise blob.fail(f"general.alignment is {align!r}")
        start = (blob.pos + align - 1) // align * align
        self.tensors: dict[str, TensorInfo] = {}
        for name, shape, ggml_type, offset in table:
            if ggml_type not in sizes:
                raise InputError(f"{self.path.name}: tensor {name!r} has ggml type {ggml_type}, which gguf cannot read")
            block, block_bytes = sizes[ggml_type]
            info = TensorInfo(name, shape, ggml_type, start + offset, 0)
            if shape and shape[-1] % block:
                raise blob.fail(f"tensor {name!r} of shape {shape} does not fill whole blocks of {block}")
            nbytes = info.numel // block * block_bytes
            if start + offset + nbytes > len(data):
                raise blob.fail(f"tensor {name!r} runs past the end of the file")
            self.tensors[name] = TensorInfo(name, shape, ggml_type, start + offset, nbytes)

    @property
    def architecture(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise InputError(f"{self.path.name} has no general.architecture in its metadata")
        return arch

    def type_name(self, name: str) -> str:
        from gguf import GGMLQuantizationType

        return GGMLQuantizationType(self.tensors[name].ggml_type).name

    def read(self, name: str, data: np.ndarray | None = None) -> np.ndarray:
        """Tensor ``name`` dequantized to float32 (a fresh array: the file's map is not kept)."""
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        info = self.tensors[name]
        if data is None:
            data = self.map()
        raw = data[info.offset : info.offset + info.nbytes]
        qtype = GGMLQuantizationType(info.ggml_type)
        block, block_bytes = _type_sizes()[info.ggml_type]
        rows = raw.reshape(*info.shape[:-1], info.shape[-1] // block * block_bytes) if info.shape else raw
        try:
            out = dequantize(rows, qtype)
        except NotImplementedError as e:
            raise InputError(f"{self.path.name}: tensor {name!r} is {qtype.name}, which gguf cannot dequantize") from e
        out = np.array(out, dtype=np.float32, copy=True).reshape(info.shape)
        return out

    def read_rows(self, name: str, rows, data: np.ndarray | None = None) -> np.ndarray:
        """Rows ``rows`` (indices along the first dimension) of 2-D tensor ``name``, dequantized to float32:
        only those rows' bytes are paged in and dequantized (a row is whole quantization blocks: K-quants'
        256 values, Q4_0/Q8_0's 32), so a token embedding table is never dequantized whole for a lookup."""
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        info = self.tensors[name]
        if len(info.shape) != 2:
            raise InputError(f"{self.path.name}: tensor {name!r} is not a matrix of rows")
        index = np.asarray(rows, dtype=np.int64).reshape(-1)
        n_rows, width = info.shape
        if index.size and (index.min() < 0 or index.max() >= n_rows):
            raise InputError(f"{self.path.name}: a row outside tensor {name!r}'s {n_rows} rows")
        if data is None:
            data = self.map()
        block, block_bytes = _type_sizes()[info.ggml_type]
        row_bytes = width // block * block_bytes
        table = data[info.offset : info.offset + info.nbytes].reshape(n_rows, row_bytes)
        qtype = GGMLQuantizationType(info.ggml_type)
        try:
            out = dequantize(np.ascontiguousarray(table[index]), qtype)
        except NotImplementedError as e:
            raise InputError(f"{self.path.name}: tensor {name!r} is {qtype.name}, which gguf cannot dequantize") from e
        return np.array(out, dtype=np.float32, copy=True).reshape(index.size, width)

    def map(self) -> np.ndarray:
        try:
            return np.memmap(self.path, mode="r", dtype=np.uint8)
        except (OSError, ValueError) as e:
            raise InputError(f"could not read {self.path.name}: {e}") from e


def is_gguf(path: Path) -> bool:
    """True for a file named ``*.gguf``, or any regular file starting with GGUF's magic bytes (Ollama's
    blobs are named by their hash)."""
    path = Path(path)
    if path.suffix.lower() == ".gguf":
        return True
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False
