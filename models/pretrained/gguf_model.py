"""A GGUF file as a checkpoint: its tensors under the names the family's architecture asks for
(gguf_config.py), each dequantized to float32 when its layer is first read.

The same transforms as ``transformers``' GGUF loader undo what llama.cpp's converter did:
LLaMA's q and k rows are permuted back (llama.cpp interleaves the rotary halves), Gemma 2/3's norms
lose the 1 llama.cpp added, GPT-2's Conv1D weights are transposed back. A quantized file's weights are
its dequantized values: what the user runs, not the original release.

The token embedding table (and an untied output matrix) is a :class:`RowTable`: a lookup dequantizes only
the rows of the ids asked for (Gemma 3's 262,144 × 640 table is 671 MB in float32), and the language-model
head reads it a block of rows at a time (``models.generate.head``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import Tensor

from models.engine.host import to_numpy
from models.pretrained.checkpoint import Checkpoint
from models.pretrained.gguf_config import hf_names
from models.pretrained.gguf_read import GGUFFile


class GGUFCheckpoint(Checkpoint):
    """:class:`Checkpoint`'s interface over one GGUF file: keys are transformers' names, ``info`` gives the
    float32 shape and size a tensor has once dequantized, ``read`` dequantizes it (and undoes llama.cpp's
    conversion) while the file is mapped."""

    def __init__(self, f: GGUFFile, cfg: dict) -> None:
        self.file = f
        self.cfg = cfg
        self.stored_names = hf_names(f, cfg)
        super().__init__(dict.fromkeys(self.stored_names, f.path))
        self._map: np.ndarray | None = None
        self._lock = threading.RLock()

    def info(self, key: str) -> tuple[tuple[int, ...], str, int]:
        t = self.file.tensors[self.stored_names[key]]
        shape = t.shape[::-1] if self._transposed(t.name) else t.shape
        return shape, "F32", t.numel * 4

    def _transposed(self, name: str) -> bool:
        return self.file.architecture == "gpt2" and name.endswith(
            ("attn_qkv.weight", "ffn_down.weight", "ffn_up.weight", "attn_output.weight")
        )

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._lock:
            if self._map is not None:  # nested: the outer block owns the map
                yield
                return
            self._map = self.file.map()
            self.opened.append(self.file.path)
            try:
                yield
            finally:
                self._map = None

    reads_rows = True  # Weights.table hands out a RowTable

    def table(self, key: str, name: str, device: torch.device) -> RowTable:
        return RowTable(self, key, name, self.info(key)[0], device)

    def read_rows(self, key: str, rows) -> Tensor:
        """Rows ``rows`` of matrix ``key`` as float32, only their bytes dequantized (a table stored as is:
        neither permuted nor transposed by llama.cpp's converter)."""
        name = self.stored_names[key]
        with self._lock:
            return torch.from_numpy(self.file.read_rows(name, rows, self._map))

    def read(self, key: str) -> Tensor:
        name = self.stored_names[key]
        with self._lock:
            w = self.file.read(name, self._map)
        arch = self.file.architecture
        if arch == "llama" and (".attn_q." in name or ".attn_k." in name):
            heads = self.cfg.get("num_attention_heads")
            kv = self.cfg.get("num_key_value_heads", heads)
            if heads is not None:
                w = _unpermute(w, heads if ".attn_q." in name else kv)
        elif arch in ("gemma2", "gemma3") and "norm.weight" in name:
            w = w - np.float32(1)
        elif self._transposed(name):
            w = np.ascontiguousarray(w.T)
        return torch.from_numpy(w)


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's ``permute`` of q/k rows (transformers' ``_reverse_permute_weights``)."""
    dim = w.shape[0] // n_head // 2
    return np.ascontiguousarray(w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape))


class RowTable:
    """A ``(vocab, d)`` matrix of a GGUF file, read by rows: ``table[ids]`` (any shape of ids) and
    ``table[a:b]`` dequantize only those rows, to float32 on ``device``, each checked finite; nothing of it
    is held. :meth:`whole` dequantizes it all (a head that keeps it)."""

    def __init__(self, ckpt: GGUFCheckpoint, key: str, name: str, shape: tuple[int, ...], device) -> None:
        self.ckpt, self.key, self.name, self.shape, self.device = ckpt, key, name, tuple(shape), device

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def stored_bytes(self) -> int:
        return self.ckpt.file.tensors[self.ckpt.stored_names[self.key]].nbytes

    @property
    def nbytes(self) -> int:
        """Its bytes once dequantized whole (float32)."""
        return self.shape[0] * self.shape[1] * 4

    def __getitem__(self, index) -> Tensor:
        from models.pretrained.checkpoint import finite_tensor

        if isinstance(index, slice):
            rows = np.arange(*index.indices(self.shape[0]))
            out_shape: tuple[int, ...] = (rows.size, self.shape[1])
        else:
            ids = torch.as_tensor(index)
            rows = to_numpy(ids.reshape(-1))
            out_shape = (*ids.shape, self.shape[1])
        out = self.ckpt.read_rows(self.key, rows).reshape(out_shape).to(self.device)
        return finite_tensor(out, self.name)

    def whole(self) -> Tensor:
        return self[:]
