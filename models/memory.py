"""Refuse before allocating: what a request will hold at its peak, against what is available.

``check_memory(estimate_toy_peak(cfg, n_q, n_k, cross), "...")`` raises a one-line
:class:`InputError` when the estimate exceeds :func:`available_bytes`. Estimates count what the
engine really holds at once (weights, temporaries, the trace), in bytes; they are upper bounds
measured against the peak resident size in ``bench/bench_memory.py``. An out-of-memory that still
happens (torch raises ``RuntimeError``, numpy ``MemoryError``) is recognised by
:func:`is_out_of_memory` and reported with :data:`OUT_OF_MEMORY`.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import struct
from collections.abc import Iterable
from pathlib import Path

from models.config import InputError

F32 = 4
# Python, torch's thread pools and allocator slack beyond the arrays themselves.
MARGIN = 64 << 20
OUT_OF_MEMORY = "not enough memory for this input; use fewer tokens or heads (or a smaller model)"
_OOM_TEXT = ("not enough memory", "can't allocate memory", "out of memory", "cannot allocate memory",
             "bad_alloc", "unable to allocate")  # fmt: skip


# --- what is available ---------------------------------------------------------------------------


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # other Unixes: free physical pages
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _cgroup_available() -> int | None:
    """Room left under a cgroup v2 memory limit (containers), if one is set."""
    try:
        line = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()[0]
        group = Path("/sys/fs/cgroup") / line.split("::", 1)[1].lstrip("/")
        limit = (group / "memory.max").read_text(encoding="ascii").strip()
        if limit == "max":
            return None
        return int(limit) - int((group / "memory.current").read_text(encoding="ascii"))
    except (OSError, ValueError, IndexError):
        return None


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _rlimit_available() -> int | None:
    """Room left under an address-space limit (``ulimit -v``), if one is set."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    used = _status_bytes("VmSize")
    return soft - used if used is not None else soft


def available_bytes() -> int:
    """Memory this process can still take: the least of MemAvailable, the cgroup's room and the
    room under RLIMIT_AS. Unknown everywhere: a very large number (no refusal)."""
    found = [v for v in (_meminfo_available(), _cgroup_available(), _rlimit_available()) if v is not None]
    return max(0, min(found)) if found else 1 << 62


# Layers a model keeps in memory (models.pretrained.checkpoint.LayerStore): this share of what the
# device has free beyond a reserve for the trace's and generation's own arrays, Python and torch.
LAYER_BUDGET_ENV = "EXPLORER_LAYER_BUDGET"  # bytes, to force a budget (tests, a shared machine)
LAYER_RESERVE = 1 << 30
LAYER_SHARE = 0.8
LAYER_FLOOR = 512 << 20  # never less: a checkpoint read whole when opened (up to 512 MB) stays whole


def device_available_bytes(device) -> int:
    """Memory free where a model's weights live: the card's free memory for a CUDA device
    (``torch.cuda.mem_get_info``), else :func:`available_bytes` (MemAvailable, cgroup, ulimit)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return available_bytes()


def layer_budget(device, free: int | None = None) -> int:
    """Bytes of read layers a model may keep on ``device``: ``EXPLORER_LAYER_BUDGET`` when set, else
    LAYER_SHARE of what the device has free (``free``: that many bytes, e.g. a 24 GB card's) beyond
    LAYER_RESERVE, and at least LAYER_FLOOR (a small model, read whole when it opened and checked
    against the memory then, never lets go of its layers)."""
    forced = os.environ.get(LAYER_BUDGET_ENV, "").strip()
    if forced:
        try:
            value = int(float(forced))
        except (ValueError, OverflowError):
            value = -1
        if value < 0:
            raise InputError(f"{LAYER_BUDGET_ENV} must be a number of bytes (0 or more), got {forced!r}")
        return value
    free = device_available_bytes(device) if free is None else free
    return max(LAYER_FLOOR, int((free - LAYER_RESERVE) * LAYER_SHARE))


def human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def tokens_that_fit(estimate, free: int, most: int) -> int:
    """The largest n ≤ ``most`` whose ``estimate(n)`` (bytes, growing with n) fits in ``free``; 0 if none."""
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if estimate(mid) <= free else (lo, mid - 1)
    return lo


def check_memory(needed: int, what: str, fits=None, most: int = 1 << 17,
                 hint: str = "free some memory") -> None:
    """Raise a one-line InputError when ``needed`` bytes exceed what is available; ``fits(n)``
    (the estimate for n tokens) makes it say how many tokens would fit; ``hint``, what to do."""
    free = available_bytes()
    if needed > free:
        n = tokens_that_fit(fits, free, most) if fits is not None else 0
        hint = f"at most {n:,} tokens fit with these settings; {hint}" if n else hint
        raise InputError(f"{what} needs about {human(needed)} of memory but only {human(free)} is available; {hint}")


def is_out_of_memory(exc: BaseException) -> bool:
    """True for MemoryError, torch's out-of-memory RuntimeErrors (CPU allocator, CUDA) and a memory
    map refused for want of address space (ENOMEM: an OSError, or safetensors' "os error 12")."""
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError):
        return exc.errno == errno.ENOMEM
    text = str(exc).lower()
    if isinstance(exc, RuntimeError):
        return any(t in text for t in _OOM_TEXT)
    return type(exc).__name__ == "SafetensorError" and "os error 12" in text


# --- the toy engine -------------------------------------------------------------------------------


def toy_weight_bytes(cfg) -> tuple[int, int]:
    """(bytes of the weights the request uses, bytes of the largest single weight)."""
    h, d, dk, dv, do = cfg.heads, cfg.d_model, cfg.head_dim_k, cfg.head_dim_v, cfg.out_dim
    sizes = [h * d * dk, h * d * dk, h * d * dv, h * dv * do]
    if cfg.bias:
        sizes += [h * dk, h * dk, h * dv, do]
    if cfg.score == "additive":
        sizes += [h * dk * dk, h * dk * dk, h * dk]
    elif cfg.score == "general":
        sizes += [h * dk * dk]
    return F32 * sum(sizes), F32 * max(sizes)


def trace_bytes(cfg, n_q: int, n_k: int, cross: bool) -> int:
    """Bytes a toy trace holds at most: the float32 stages kept whole (inputs, Q, K, V, head
    outputs, concat, output) plus what the pair store may keep of the n×n stages (its budget);
    those are computed per head and block of rows when read, never all at once (models.engine.pairs)."""
    from models.engine.pairs import DEFAULT_BUDGET

    h, d, dk, dv = cfg.heads, cfg.d_model, cfg.head_dim_k, cfg.head_dim_v
    inputs = 3 * n_k * d + (n_q * d if cross else 0)  # embeddings, positional encoding, input, query
    projections = h * (n_q * dk + n_k * dk + n_k * dv)  # q, k, v
    outputs = h * n_q * dv + n_q * h * dv + n_q * cfg.out_dim + h * n_k  # head outputs, concat, output, value norms
    pairs = 5 * h * n_q * n_k  # scores, scaled, masked, weights, weighted norms
    return F32 * (inputs + projections + outputs) + min(DEFAULT_BUDGET, F32 * pairs)


def estimate_toy_peak(cfg, n_q: int, n_k: int, cross: bool) -> int:
    """Peak bytes of one toy computation: weights (+ the two temporaries drawing the largest),
    the embedding table, the trace, softmax's temporaries and the additive score chunk."""
    h, d, dk = cfg.heads, cfg.d_model, cfg.head_dim_k
    weights, largest = toy_weight_bytes(cfg)
    drawing = 2 * largest  # rand * 2 - 1, then * bound
    table = F32 * (n_q + n_k) * d * 2  # the nn.Embedding table and its lookups
    from models.engine.pairs import BLOCK_BYTES
    from models.engine.reduce import BAND_CELLS

    pair = min(F32 * h * n_q * n_k, 2 * BLOCK_BYTES)  # one block of rows at a time (per thread)
    softmax = 3 * pair + pair // F32  # x - max, x / T, the result (+ the bool mask)
    softmax += 4 * F32 * BAND_CELLS  # the display's reduction of one band of rows
    score = 0
    if cfg.score == "additive":
        score = 2 * F32 * min(h * n_q * n_k * dk, 1 << 24)  # one chunk: the sum and its tanh
    elif cfg.score == "general":
        score = F32 * h * n_q * dk
    work = max(drawing, table + softmax + score)
    return weights + trace_bytes(cfg, n_q, n_k, cross) + work + MARGIN


# --- pretrained models ----------------------------------------------------------------------------

_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8,
             "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}  # fmt: skip


def _safetensors_sizes(path: Path) -> list[tuple[int, int, bool]]:
    """(stored bytes, elements, is float32) of each tensor, from the file's JSON header only."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if length > 100 << 20:
            raise ValueError("header too large")
        header = json.loads(f.read(length))
    sizes = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, stop = info["data_offsets"]
        item = _ITEMSIZE.get(info["dtype"], 4)
        sizes.append((stop - start, (stop - start) // item, info["dtype"] == "F32"))
    return sizes


def _torch_sizes(path: Path) -> list[tuple[int, int, bool]]:
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)  # reads no data
    return [(t.nbytes, t.numel(), t.dtype == torch.float32) for t in state.values()]


def estimate_pretrained_load(files: Iterable[Path]) -> int:
    """Peak bytes while loading a checkpoint: every stored tensor read into memory, plus a
    float32 copy of each tensor stored in another dtype (a float16 checkpoint costs ~3× its size)."""
    total = 0
    for path in files:
        try:
            sizes = _safetensors_sizes(path) if path.suffix == ".safetensors" else _torch_sizes(path)
        except Exception:  # unreadable here: the loader reports it; assume float16 on disk
            size = path.stat().st_size if path.is_file() else 0
            sizes = [(size, size // 2, False)]
        stored = sum(s for s, _, _ in sizes)
        converted = sum(F32 * n for _, n, f32 in sizes if not f32)
        largest = max((n for _, n, _ in sizes), default=0)  # the finiteness check's bool mask
        total += stored + converted + largest
    return total + MARGIN


def estimate_tensors_read(stored: Iterable[int], held: Iterable[int]) -> int:
    """Peak bytes of reading some checkpoint tensors: their stored bytes, what they hold once
    converted (``held``), and the finiteness check's bool mask of the largest."""
    held = list(held)
    return sum(stored) + sum(held) + max(held, default=0) // 2 + MARGIN


def estimate_pretrained_peak(arch, n: int, layer: int) -> int:
    """Peak bytes of tracing ``layer`` on ``n`` tokens, beyond the loaded weights: the cached
    hidden states, one block's temporaries and n×n tensors, and the trace's copies. Layers of a
    big checkpoint not read yet are counted by the caller (``LayerStore.bytes_to_read``)."""
    h, d, dk = arch.num_heads, arch.hidden_size, arch.head_dim
    ffn = getattr(arch, "ffn", None) or 4 * d  # never arch.layers[0]: that would read it
    states = F32 * (layer + 2) * n * d
    vectors = F32 * n * (3 * h * dk + 2 * h * dk + 6 * d + 3 * ffn)  # q k v, repeated k v, ffn
    from models.engine.attend import BLOCK_CELLS
    from models.engine.pairs import BLOCK_BYTES, DEFAULT_BUDGET, LONG_CELLS

    if n * n > LONG_CELLS:  # a long input: no n×n tensor in any layer (models.engine.attend.attend_blocks);
        # the traced layer keeps its rows' statistics (3 per head and row) and the pair store's budget
        blocks = 6 * F32 * BLOCK_CELLS + 8 * BLOCK_BYTES  # one block of rows taken apart, the overview's
        return states + vectors + 2 * F32 * h * n * dk + 3 * F32 * h * n + DEFAULT_BUDGET + blocks + MARGIN
    # The traced layer's n×n stages are computed per head and block of rows, kept within the pair
    # store's budget; the layers below run fused (SDPA) with the boolean masks (n² bytes each) ...
    pairs = min(DEFAULT_BUDGET, F32 * 5 * h * n * n) + 8 * BLOCK_BYTES + 3 * n * n
    if getattr(arch, "softcap", None) is not None or getattr(arch, "sinks", False):  # ... except
        # soft-capped ones and those with attention sinks, taken apart whole
        pairs += F32 * 8 * h * n * n
    return states + vectors + pairs + MARGIN


def estimate_encdec_peak(arch, n: int, read: int) -> int:
    """Peak bytes of tracing an encoder-decoder on a source and a target of at most ``n`` tokens each:
    every layer's states, the explicit attention of one layer and its bias; ``read``, the bytes of the
    checkpoint's layers not read yet (``LayerStore.bytes_to_read``)."""
    states = F32 * (arch.num_layers + 4) * n * arch.hidden_size
    return states + F32 * 6 * arch.num_heads * n * n + read + MARGIN
