"""Is a training history what it says? A content hash per checkpoint, and the steps that serve the
same weights named before anything is plotted.

A checkpoint's hash is the SHA-256 of its tensors (each tensor's name, dtype, shape and bytes, in
name order), read from the weights files the loader reads; file metadata (safetensors'
``__metadata__``, a file's name or its sharding) does not enter it, so two checkpoints hold the same
hash exactly when they hold the same weights. EleutherAI/pythia #205/#206: 86 of 154 step branches of
pythia-2.8b serve the final weights; this is how a user finds out.

Hashes are remembered in the app's own cache (``$XDG_CACHE_HOME/attention-explorer/weights-hashes.json``,
keyed by each weights file's path, size and modification time), never in the user's model folder:
a history is read, never written.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from models.config import InputError
from models.io import check_regular

CHUNK = 16 << 20  # bytes read at a time while hashing
CACHE_ENV = "ATTENTION_EXPLORER_CACHE"  # a folder for the app's caches (tests point it at tmp_path)
MAX_HEADER = 100 << 20  # safetensors' own limit on a header


def cache_file() -> Path:
    root = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / (
        "attention-explorer")
    return Path(root) / "weights-hashes.json"


def weights_files(folder: Path) -> list[Path]:
    """The files holding the checkpoint's tensors, as the loader picks them (safetensors first)."""
    from models.pretrained.loader import weight_files

    folder = Path(folder)
    if folder.is_file() and folder.suffix == ".gguf":
        return [folder]
    files, _ = weight_files(folder)
    return files


def _safetensors_digest(path: Path, h) -> None:
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise InputError(f"{path} is not a safetensors file (shorter than its header)")
        (size,) = struct.unpack("<Q", raw)
        if size > MAX_HEADER:
            raise InputError(f"{path} is not a safetensors file (a header of {size:,} bytes)")
        try:
            header = json.loads(f.read(size))
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: unreadable safetensors header ({exc})") from None
        base = 8 + size
        for name in sorted(k for k in header if k != "__metadata__"):
            info = header[name]
            start, end = info["data_offsets"]
            h.update(f"{name}|{info['dtype']}|{info['shape']}|".encode())
            f.seek(base + start)
            left = end - start
            while left > 0:
                block = f.read(min(CHUNK, left))
                if not block:
                    raise InputError(f"{path} is truncated (tensor {name} ends past the file)")
                h.update(block)
                left -= len(block)


def _torch_digest(path: Path, h) -> None:
    import torch

    from models.engine.host import to_numpy

    try:
        tensors = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable pickle is one line
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"cannot read {path}: {why}") from None
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        h.update(f"{name}|{t.dtype}|{list(t.shape)}|".encode())
        h.update(to_numpy(t.view(torch.uint8)).tobytes() if t.numel() else b"")


def _gguf_digest(path: Path, h) -> None:
    from gguf import GGUFReader

    reader = GGUFReader(path)
    for t in sorted(reader.tensors, key=lambda t: t.name):
        h.update(f"{t.name}|{t.tensor_type.name}|{list(map(int, t.shape))}|".encode())
        h.update(bytes(t.data.tobytes()))


def file_digest(path: Path) -> str:
    """The SHA-256 of one weights file's tensors (not of its bytes: metadata left out)."""
    check_regular(path, "weights file")
    h = hashlib.sha256()
    if path.suffix == ".safetensors":
        _safetensors_digest(path, h)
    elif path.suffix == ".gguf":
        _gguf_digest(path, h)
    else:
        _torch_digest(path, h)
    return h.hexdigest()


class HashCache:
    """``{"path|size|mtime_ns": digest}`` in one JSON file; a file that changed is hashed again."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_file()
        try:
            self.table = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(self.table, dict):
                self.table = {}
        except (OSError, ValueError, UnicodeDecodeError):
            self.table = {}
        self.changed = False
        self.hashed = 0  # files hashed (not found in the cache) by this instance

    @staticmethod
    def key(path: Path) -> str:
        st = Path(path).stat()
        return f"{Path(path).resolve()}|{st.st_size}|{st.st_mtime_ns}"

    def digest(self, path: Path) -> str:
        key = self.key(path)
        found = self.table.get(key)
        if isinstance(found, str):
            return found
        self.table[key] = found = file_digest(Path(path))
        self.changed, self.hashed = True, self.hashed + 1
        return found

    def save(self) -> None:
        """Best effort: a cache that cannot be written costs a second hashing, nothing else."""
        if not self.changed:
            return
        from models.io.atomic import atomic_file

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(self.path, "hash cache") as f:
                f.write(json.dumps(self.table, indent=0, sort_keys=True).encode())
        except (OSError, InputError):
            return
        self.changed = False


def checkpoint_hash(folder: Path, cache: HashCache | None = None) -> str:
    """One checkpoint's content hash: its weights files' digests, combined in name order."""
    cache = cache or HashCache()
    digests = sorted(cache.digest(p) for p in weights_files(Path(folder)))
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("".join(digests).encode()).hexdigest()


@dataclass(frozen=True)
class Integrity:
    hashes: dict[int, str]  # step -> content hash
    groups: list[list[int]]  # steps that share one hash (two or more each), in step order

    @property
    def broken(self) -> bool:
        return bool(self.groups)

    def duplicate_of(self, step: int) -> int | None:
        """The first step holding the same weights as ``step`` (None when it is the first or unique)."""
        for group in self.groups:
            if step in group and step != group[0]:
                return group[0]
        return None

    def message(self) -> str:
        """One line per group of identical checkpoints ("" for a sound history)."""
        lines = []
        for group in self.groups:
            named = ", ".join(f"step {s}" for s in group[:-1]) + f" and step {group[-1]}"
            lines.append(f"{named} hold the same weights: this history is broken "
                         f"(a checkpoint saved twice, or a step that serves another's weights)")  # fmt: skip
        return "\n".join(lines)


def check_history(steps: dict[int, Path], cache: HashCache | None = None,
                  progress: Callable[[int, int], None] | None = None) -> Integrity:  # fmt: skip
    """Every step's content hash and the groups of steps that hold identical weights."""
    own = cache is None
    cache = cache or HashCache()
    hashes: dict[int, str] = {}
    try:
        for i, (step, folder) in enumerate(sorted(steps.items())):
            hashes[step] = checkpoint_hash(folder, cache)
            if progress:
                progress(i + 1, len(steps))
    finally:
        if own:
            cache.save()
    return Integrity(hashes, same_weights(hashes.items()))


def same_weights(pairs: Iterable[tuple[int, str]]) -> list[list[int]]:
    by_hash: dict[str, list[int]] = {}
    for step, digest in sorted(pairs):
        by_hash.setdefault(digest, []).append(step)
    return sorted((g for g in by_hash.values() if len(g) > 1), key=lambda g: g[0])
