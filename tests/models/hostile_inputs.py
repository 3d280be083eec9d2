"""Honest inputs too big for a memory cap, that cost no disk: sparse files.

``inflate`` copies a model folder whose vocabulary-sized tensors (the embeddings, a head) grow to
``nbytes`` together, their new rows zeros that the file does not store (a hole), and its
``config.json`` says so; ``sparse_npy`` writes a ``.npy`` of zeros of any shape the same way.
Every byte a reader asks for is there: only the memory it would take is too much."""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path

from numpy.lib import format as npformat


def sparse_npy(path: Path, shape: tuple[int, ...], dtype: str = "<f4") -> Path:
    with open(path, "wb") as f:
        npformat.write_array_header_1_0(f, {"descr": dtype, "fortran_order": False, "shape": shape})
        f.truncate(f.tell() + math.prod(shape) * int(dtype[-1]))
    return path


def inflate(src: Path, dst: Path, nbytes: int) -> Path:
    """``src`` (a folder holding one ``model.safetensors``) copied to ``dst`` with ``vocab_size``
    raised so that its vocabulary-sized tensors hold ``nbytes``."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text(encoding="utf-8"))
    vocab = cfg["vocab_size"]
    raw = (dst / "model.safetensors").read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header, data = json.loads(raw[8 : 8 + length]), raw[8 + length :]
    meta = header.pop("__metadata__", None)
    grown = {k for k, info in header.items() if info["shape"][:1] == [vocab]}
    row_bytes = sum((info["data_offsets"][1] - info["data_offsets"][0]) // vocab for k, info in header.items()
                    if k in grown)  # fmt: skip
    rows = max(vocab, nbytes // row_bytes)
    out, blobs, holes, at = {}, [], [], 0
    for name, info in sorted(header.items(), key=lambda kv: kv[0] in grown):  # the grown ones last
        start, stop = info["data_offsets"]
        size = (stop - start) // vocab * rows if name in grown else stop - start
        out[name] = {**info, "shape": [rows, *info["shape"][1:]] if name in grown else info["shape"],
                     "data_offsets": [at, at + size]}  # fmt: skip
        (holes if name in grown else blobs).append((at, data[start:stop]))
        at += size
    if meta is not None:
        out["__metadata__"] = meta
    text = json.dumps(out).encode()
    text += b" " * (-len(text) % 8)
    with open(dst / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for offset, chunk in blobs + holes:  # the stored rows first, then a hole to the end
            f.seek(8 + len(text) + offset)
            f.write(chunk)
        f.truncate(8 + len(text) + at)
    cfg["vocab_size"] = rows
    (dst / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return dst
