"""Open a model folder: config.json -> architecture, weights -> float32 tensors, tokenizer.json.

A small checkpoint is read whole when opened; a big one reads its embeddings now and each
layer when a trace first needs it (see checkpoint.py), converting one layer at a time.

No code from the folder ever runs: weights are read with safetensors, or with
``torch.load(weights_only=True)`` for pytorch_model.bin (no pickle objects), and there is no
trust_remote_code. Every problem with the folder becomes a one-line :class:`InputError`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import torch

from models.config import DEVICES, InputError
from models.engine.device import pick_device
from models.io import check_regular
from models.memory import check_memory, estimate_pretrained_load, estimate_tensors_read
from models.pretrained.architecture import Architecture
from models.pretrained.bart import Bart, Marian
from models.pretrained.bert import Bert, DistilBert, Roberta, XLMRoberta
from models.pretrained.checkpoint import Checkpoint, Weights
from models.pretrained.cohere import Cohere
from models.pretrained.encdec import EncoderDecoder
from models.pretrained.encdec_model import EncoderDecoderModel
from models.pretrained.falcon import Falcon
from models.pretrained.gemma import Gemma, Gemma2
from models.pretrained.gemma3 import Gemma3Text
from models.pretrained.gpt2 import GPT2
from models.pretrained.gpt_neox import GPTNeoX
from models.pretrained.gpt_oss import GptOss
from models.pretrained.granite import Granite
from models.pretrained.layer_store import DTYPES
from models.pretrained.llama import Llama
from models.pretrained.model import PretrainedModel
from models.pretrained.modernbert import ModernBert
from models.pretrained.olmo2 import Olmo2
from models.pretrained.opt import OPT
from models.pretrained.phi import Phi
from models.pretrained.phi3 import Phi3
from models.pretrained.qwen import Mistral, Qwen2, Qwen3
from models.pretrained.qwen_moe import Qwen2Moe, Qwen3Moe
from models.pretrained.registry import (
    BUILTIN,
    SUPPORTED_TYPES,
    WEIGHT_FILES,
    display_name,
    is_gguf_path,
    read_config,
    resolve_model,
)
from models.pretrained.smollm3 import SmolLM3
from models.pretrained.stablelm import StableLm
from models.pretrained.starcoder2 import Starcoder2
from models.pretrained.steps import step_folder
from models.pretrained.t5 import MT5, T5
from models.pretrained.tokenizer import ModelTokenizer, first_line

Progress = Callable[[float, str], None]


def gguf_tokenizer_of(path: Path) -> ModelTokenizer:
    from models.pretrained.gguf_tokenizer import file_tokenizer

    return ModelTokenizer.of(file_tokenizer(path))


def gguf_weights(path: Path, cfg: dict, model_type: str, device: torch.device) -> Weights:
    """The base model's tensors of a GGUF file, by the names the family asks for (nothing read yet)."""
    from models.pretrained.gguf_config import PREFIX, read_gguf
    from models.pretrained.gguf_model import GGUFCheckpoint

    ckpt = GGUFCheckpoint(read_gguf(path), cfg)
    prefix = PREFIX.get(model_type, "model.")
    names = {k[len(prefix) :]: k for k in ckpt.keys if k.startswith(prefix)}
    return Weights(ckpt, names, model_type, device)

ARCHITECTURES: dict[str, type[Architecture] | type[EncoderDecoder]] = {
    arch.model_type: arch
    for arch in (
        Bert, Roberta, XLMRoberta, DistilBert, GPT2, GPTNeoX,
        Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma2, Phi3,
        Olmo2, SmolLM3, Granite, Qwen2Moe, Qwen3Moe, Starcoder2, StableLm, Cohere,
        Gemma3Text, GptOss, Phi, OPT, Falcon, ModernBert,
        T5, MT5, Bart, Marian,
    )
}  # fmt: skip
assert tuple(ARCHITECTURES) == SUPPORTED_TYPES, "registry.SUPPORTED_TYPES is out of date"


def family_kind(model_type: str) -> str:
    """``"encoder"``, ``"decoder"`` or ``"encoder-decoder"``: what a family can do follows from it
    (generation needs a decoder), and the tests derive their capability matrix from it."""
    arch = ARCHITECTURES[model_type]
    if getattr(arch, "encoder_decoder", False):
        return "encoder-decoder"
    return "decoder" if arch.default_mask == "causal" else "encoder"
# A checkpoint whose files are at most this big is read whole when it is opened (every layer
# checked and converted up front); a bigger one is read layer by layer when traced.
PRELOAD_FILE_BYTES = 512 << 20


def resolve_device(device: str) -> tuple[torch.device, str, str | None]:
    """``(device, label, notice)`` exactly like the rest of the engine (CUDA falls back to CPU)."""
    if device not in DEVICES:
        raise InputError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    return pick_device(device)


def weight_files(folder: Path) -> tuple[list[Path], dict[str, str] | None]:
    """The checkpoint files, safetensors preferred, and for a sharded checkpoint its index's
    ``weight_map`` (stored key -> shard file name)."""
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.exists():
            continue
        check_regular(path, "weights file")  # a FIFO is named as one, never waited on (nor "no weights")
        if not name.endswith(".index.json"):
            return [path], None
        from models.io import read_json

        weight_map = read_json(path, "shard index", prefix=f"could not read shard index {path}").get("weight_map")
        try:
            shards = sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise InputError(f"could not read shard index {path}: {first_line(e)}") from e
        if not all(isinstance(s, str) and s == Path(s).name for s in shards):
            raise InputError(f"shard index {path} names files outside the model folder")
        if not all(isinstance(k, str) for k in weight_map):
            raise InputError(f"shard index {path} has a key that is not a string")
        return [folder / s for s in shards], weight_map
    raise InputError(f"{folder} has no weights: expected model.safetensors or pytorch_model.bin")


def open_weights(
    files: list[Path], weight_map: dict[str, str] | None, model_type: str, device: torch.device
) -> Weights:
    """The base model's tensors by name (the prefix before the family's embedding key removed),
    nothing read yet beyond the headers (of the single file; a sharded index names them all)."""
    ckpt = Checkpoint.from_files(files, weight_map)
    arch = ARCHITECTURES[model_type]
    anchor = getattr(arch, "anchors", (arch.anchor,))[0]
    for anchor in getattr(arch, "anchors", (arch.anchor,)):  # the first one the checkpoint holds
        hits = [k for k in ckpt.keys if k == anchor or k.endswith("." + anchor)]
        if hits:
            break
    if not hits:
        raise InputError(f"the weights have no {anchor!r}; is this really a {model_type} model?")
    prefix = min(hits, key=len)[: -len(anchor)]
    names = {}
    for key in ckpt.keys:
        if not key.startswith(prefix):
            continue  # outside the base model: lm_head, cls, ...
        name = key[len(prefix) :]
        if model_type == "bert" and name.endswith((".gamma", ".beta")):
            # very old BERT checkpoints call LayerNorm's weight and bias gamma and beta
            stem, kind = name.rsplit(".", 1)
            name = f"{stem}.{'weight' if kind == 'gamma' else 'bias'}"
        names[name] = key
    return Weights(ckpt, names, model_type, device)


def load_model(
    name_or_path: str | os.PathLike, device: str = "auto", progress: Progress | None = None,
    step: str | int | None = None, dtype: str = "float32",
) -> PretrainedModel | EncoderDecoderModel:
    """Open a model by name (``"minilm"``, a cached ``"gpt2"`` / ``"org/name"``) or folder.

    ``progress(fraction, message)`` is called a few times for a progress bar. ``step``: one of
    the model's training steps (models/pretrained/steps.py), ``"first"`` or ``"last"``. ``dtype``:
    what its layers are held in and the layers below a traced one and generation compute in
    (``"float32"``, ``"bfloat16"``, ``"float16"``); the traced layer is float32 whatever it is.
    """
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    report = progress or (lambda fraction, message: None)
    start = time.perf_counter()
    folder = step_folder(resolve_model(name_or_path), step)
    cfg = read_config(folder)
    model_type = cfg["model_type"]
    gguf = is_gguf_path(folder)
    # Before the first report: reading tokenizer.json (tokenizers, in Rust) holds the interpreter
    # lock for ~40 ms, which a report's handler on another thread (a window's) would wait out.
    tokenizer = gguf_tokenizer_of(folder) if gguf else ModelTokenizer(folder / "tokenizer.json")
    report(0.0, "Opening the checkpoint")
    dev, label, notice = resolve_device(device)
    if gguf:  # one file, its tensors dequantized when read: sized by what they hold in float32
        weights = gguf_weights(folder, cfg, model_type, dev)
        files, held = [folder], [t.numel * 4 for t in weights.ckpt.file.tensors.values()]
        whole = sum(held) <= PRELOAD_FILE_BYTES
    else:
        files, weight_map = weight_files(folder)
        weights = open_weights(files, weight_map, model_type, dev)  # headers only
        whole = sum(f.stat().st_size for f in files) <= PRELOAD_FILE_BYTES
    weights.layer_dtype = DTYPES[dtype]
    what = f"loading {display_name(folder)}"
    if whole and gguf:  # every tensor dequantized now, each one's stored bytes paged in
        check_memory(estimate_tensors_read([folder.stat().st_size], held), what)
    elif whole:  # read whole now: every tensor and its float32 copy
        check_memory(estimate_pretrained_load(files), what)
    else:  # only what the model reads when built (embeddings, final norm); the layers
        meta = weights.as_meta()  # are checked by each trace (PretrainedModel.trace)
        ARCHITECTURES[model_type](cfg, meta)
        check_memory(estimate_tensors_read(meta.taken, meta.held), what)
    report(0.1, "Reading the embeddings")
    with torch.no_grad():
        with weights.ckpt.reading():
            arch = ARCHITECTURES[model_type](cfg, weights)
        if whole:
            # small: read every layer now (checked and converted), as one progress bar
            with arch.layers.reading(range(arch.num_layers), report, span=(0.15, 0.95)):
                for i in range(arch.num_layers):
                    arch.layers[i]
    name = str(name_or_path).strip()
    if name.lower() != BUILTIN and (Path(name).expanduser().is_dir() or gguf):
        name = display_name(folder)
    if step is not None:
        name = f"{name} @ {folder.name}"
    kind = EncoderDecoderModel if isinstance(arch, EncoderDecoder) else PretrainedModel
    model = kind(name, folder, arch, tokenizer, dev, label, [notice] if notice else [])
    model.progress = report  # later layers of a big checkpoint are read when first traced
    model.load_ms = (time.perf_counter() - start) * 1000
    report(1.0, f"Loaded {name}")
    return model
