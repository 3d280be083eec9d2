"""Open a model folder: config.json -> architecture, weights -> float32 tensors, tokenizer.json.

No code from the folder ever runs: weights are read with safetensors, or with
``torch.load(weights_only=True)`` for pytorch_model.bin (no pickle objects), and there is no
trust_remote_code. Every problem with the folder becomes a one-line :class:`InputError`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from torch import Tensor

from models.config import DEVICES, Cancelled, InputError
from models.device import pick_device
from models.memory import check_memory, estimate_pretrained_load
from models.pretrained.bert import Bert
from models.pretrained.common import Architecture, Weights
from models.pretrained.gpt2 import GPT2
from models.pretrained.llama import Llama
from models.pretrained.model import PretrainedModel
from models.pretrained.registry import (
    BUILTIN,
    WEIGHT_FILES,
    display_name,
    read_config,
    resolve_model,
)
from models.pretrained.tokenizer import ModelTokenizer, first_line

Progress = Callable[[float, str], None]

ARCHITECTURES: dict[str, type[Architecture]] = {"bert": Bert, "gpt2": GPT2, "llama": Llama}
# The embedding matrix of each family; whatever precedes it in the key ("bert.", "transformer.",
# "model.") is the base model's prefix, and keys outside it (lm_head, cls, ...) are not needed.
ANCHORS = {
    "bert": "embeddings.word_embeddings.weight",
    "gpt2": "wte.weight",
    "llama": "embed_tokens.weight",
}


def resolve_device(device: str) -> tuple[torch.device, str, str | None]:
    """``(device, label, notice)`` exactly like the rest of the engine (CUDA falls back to CPU)."""
    if device not in DEVICES:
        raise InputError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    return pick_device(device)


def weight_files(folder: Path) -> list[Path]:
    """The checkpoint files, safetensors preferred; a sharded checkpoint lists its shards."""
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if not name.endswith(".index.json"):
            return [path]
        try:
            weight_map = json.loads(path.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise InputError(f"could not read shard index {path}: {first_line(e)}") from e
        if not all(isinstance(s, str) and s == Path(s).name for s in shards):
            raise InputError(f"shard index {path} names files outside the model folder")
        return [folder / s for s in shards]
    raise InputError(f"{folder} has no weights: expected model.safetensors or pytorch_model.bin")


def read_file(path: Path, done: Callable[[float], None]) -> dict[str, Tensor]:
    """All tensors of one weights file, on the CPU, in their stored dtype.

    ``done(fraction)`` follows the reading of a .safetensors file tensor by tensor.
    """
    if not path.is_file():
        raise InputError(f"missing weights file {path}")
    try:
        if path.suffix == ".safetensors":
            with safe_open(str(path), framework="pt", device="cpu") as f:
                keys = list(f.keys())
                tensors = {}
                for i, k in enumerate(keys):
                    tensors[k] = f.get_tensor(k)
                    if i % 16 == 15:
                        done((i + 1) / len(keys))
                return tensors
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Cancelled:  # raised by a progress callback whose caller gave up: not a corrupt file
        raise
    except Exception as e:  # SafetensorError, pickle.UnpicklingError, RuntimeError, OSError...
        reason = first_line(e)
        raise InputError(f"could not read {path.name} (truncated or corrupt?): {reason}") from e
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise InputError(f"{path.name} does not hold a plain dict of tensors")
    return state


def read_weights(
    files: list[Path], model_type: str, device: torch.device, progress: Progress
) -> Weights:
    """The base model's tensors (still on the CPU, as stored), keys without the prefix."""
    tensors: dict[str, Tensor] = {}
    for i, path in enumerate(files):
        message = f"Reading {path.name}"

        def done(fraction: float, i: int = i, message: str = message) -> None:
            progress(0.1 + 0.8 * (i + fraction) / len(files), message)

        done(0.0)
        tensors.update(read_file(path, done))
    anchor = ANCHORS[model_type]
    hits = [k for k in tensors if k == anchor or k.endswith("." + anchor)]
    if not hits:
        raise InputError(f"the weights have no {anchor!r}; is this really a {model_type} model?")
    prefix = min(hits, key=len)[: -len(anchor)]
    weights = {}
    for key, t in tensors.items():
        if not key.startswith(prefix):
            continue  # outside the base model: lm_head, cls, ...
        name = key[len(prefix) :]
        if model_type == "bert" and name.endswith((".gamma", ".beta")):
            # very old BERT checkpoints call LayerNorm's weight and bias gamma and beta
            stem, kind = name.rsplit(".", 1)
            name = f"{stem}.{'weight' if kind == 'gamma' else 'bias'}"
        weights[name] = t
    return Weights(weights, model_type, device)


def load_model(
    name_or_path: str | os.PathLike, device: str = "auto", progress: Progress | None = None
) -> PretrainedModel:
    """Open a model by name (``"minilm"``, a cached ``"gpt2"`` / ``"org/name"``) or folder.

    ``progress(fraction, message)`` is called a few times for a progress bar.
    """
    report = progress or (lambda fraction, message: None)
    start = time.perf_counter()
    folder = resolve_model(name_or_path)
    report(0.0, "Reading config.json")
    cfg = read_config(folder)
    model_type = cfg["model_type"]
    files = weight_files(folder)
    check_memory(estimate_pretrained_load(files), f"loading {display_name(folder)}")
    report(0.05, "Reading tokenizer.json")
    tokenizer = ModelTokenizer(folder / "tokenizer.json")
    dev, label, notice = resolve_device(device)
    weights = read_weights(files, model_type, dev, report)
    report(0.9, f"Building the {model_type} model")
    with torch.no_grad():
        arch = ARCHITECTURES[model_type](cfg, weights)
    name = str(name_or_path).strip()
    if name.lower() != BUILTIN and Path(name).expanduser().is_dir():
        name = display_name(folder)
    model = PretrainedModel(name, folder, arch, tokenizer, dev, label, [notice] if notice else [])
    model.load_ms = (time.perf_counter() - start) * 1000
    report(1.0, f"Loaded {name}")
    return model
