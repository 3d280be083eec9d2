"""A GGUF file's metadata as the config.json it stands for, and its tensors' names as transformers' state
dict spells them: the mapping of ``transformers``' own GGUF loader (``integrations/ggml.py``,
``modeling_gguf_pytorch_utils.py``): the same metadata keys become the same config keys, and the same
``gguf`` tensor-name map (``gguf.get_tensor_name_map``) pairs the file's ``blk.N.attn_q.weight`` with
``model.layers.N.self_attn.q_proj.weight``.

Torch-free, like registry.py: the model list and ``read_config`` use it. Parsed headers are kept (by the
file's path, size and mtime), so that reading a file's config again costs nothing.
"""

from __future__ import annotations

from pathlib import Path

from models.config import InputError
from models.io.files import VersionCache
from models.pretrained.gguf_read import GGUFFile

_LLAMA_KEYS = {
    "context_length": "max_position_embeddings",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "embedding_length": "hidden_size",
    "rope.freq_base": "rope_theta",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "vocab_size": "vocab_size",
}
_GEMMA_KEYS = {**_LLAMA_KEYS, "attention.key_length": "head_dim", "attention.sliding_window": "sliding_window"}
# GGUF architecture -> (our model_type, {metadata key after "<arch>.": config key}); what transformers reads
CONFIG_KEYS: dict[str, tuple[str, dict[str, str]]] = {
    "llama": ("llama", {**_LLAMA_KEYS, "rope.dimension_count": "head_dim"}),
    "qwen2": ("qwen2", _LLAMA_KEYS),
    "qwen3": ("qwen3", {**_LLAMA_KEYS, "attention.key_length": "head_dim"}),
    "phi3": ("phi3", _LLAMA_KEYS),
    "gemma2": ("gemma2", _GEMMA_KEYS),
    "gemma3": ("gemma3_text", _GEMMA_KEYS),
    "starcoder2": ("starcoder2", {
        "block_count": "num_hidden_layers", "context_length": "max_position_embeddings",
        "embedding_length": "hidden_size", "feed_forward_length": "intermediate_size",
        "attention.head_count": "num_attention_heads", "attention.head_count_kv": "num_key_value_heads",
        "attention.layer_norm_epsilon": "norm_epsilon",
    }),
    "falcon": ("falcon", _LLAMA_KEYS),
    "stablelm": ("stablelm", {
        "context_length": "max_position_embeddings", "block_count": "num_hidden_layers",
        "feed_forward_length": "intermediate_size", "embedding_length": "hidden_size",
        "attention.head_count": "num_attention_heads", "attention.head_count_kv": "num_key_value_heads",
        "attention.layer_norm_epsilon": "layer_norm_eps", "vocab_size": "vocab_size",
    }),
    "gpt2": ("gpt2", {
        "block_count": "n_layer", "context_length": "n_ctx", "embedding_length": "n_embd",
        "feed_forward_length": "feed_forward_length", "attention.head_count": "n_head",
        "attention.layer_norm_epsilon": "layer_norm_epsilon",
    }),
}  # fmt: skip
TOKEN_IDS = {"bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id",
             "unknown_token_id": "unk_token_id", "padding_token_id": "pad_token_id"}  # fmt: skip
# what the config class supplies when the file does not say (transformers builds its config on them)
CLASS_DEFAULTS = {
    "gpt2": {"n_positions": 1024},
    "qwen3": {"head_dim": 128},
    "gemma2": {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0},
}
# the base model's prefix in transformers' state dict (``base_model_prefix``)
PREFIX = {"gpt2": "transformer.", "falcon": "transformer."}


def supported_architectures() -> tuple[str, ...]:
    return tuple(CONFIG_KEYS)


def gguf_config(f: GGUFFile) -> dict:
    """The config.json this file's metadata stands for, as transformers' GGUF loader builds it."""
    arch = f.architecture
    if arch not in CONFIG_KEYS:
        raise InputError(
            f"{f.path.name}: GGUF architecture {arch!r} is not supported; "
            f"supported: {', '.join(CONFIG_KEYS)}"
        )
    experts = f.metadata.get(f"{arch}.expert_count")
    if isinstance(experts, int) and experts > 0:  # Mixtral is stored as "llama" with its experts stacked
        raise InputError(
            f"{f.path.name}: a mixture-of-experts GGUF file ({arch}, {experts} experts) is not supported; "
            "only dense models open from GGUF"
        )
    model_type, keys = CONFIG_KEYS[arch]
    cfg: dict = {"model_type": model_type, **CLASS_DEFAULTS.get(model_type, {})}
    for key, name in keys.items():
        value = f.metadata.get(f"{arch}.{key}")
        if value is not None:
            cfg[name] = value
    for key, name in TOKEN_IDS.items():
        value = f.metadata.get(f"tokenizer.ggml.{key}")
        if value is not None:
            cfg[name] = value
    cfg["tie_word_embeddings"] = "output.weight" not in f.tensors or arch == "falcon"  # transformers' exception
    if arch == "stablelm":  # what transformers reads off the tensors present
        cfg["use_qkv_bias"] = any(f"attn_{x}.bias" in name for name in f.tensors for x in "qkv")
        cfg["use_parallel_residual"] = not any("ffn_norm" in name for name in f.tensors)
    if "vocab_size" not in cfg and isinstance(f.metadata.get("tokenizer.ggml.tokens"), list):
        cfg["vocab_size"] = len(f.metadata["tokenizer.ggml.tokens"])
    return cfg


def _arch_enum(arch: str):
    from gguf import MODEL_ARCH_NAMES

    for key, value in MODEL_ARCH_NAMES.items():
        if value == arch:
            return key
    raise InputError(f"GGUF architecture {arch!r} is unknown to the gguf package")


def hf_names(f: GGUFFile, cfg: dict) -> dict[str, str]:
    """``{transformers' state-dict key: the file's tensor name}`` for every tensor of the file, under every
    spelling gguf's name map knows (the architecture picks the one it asks for)."""
    from gguf import get_tensor_name_map

    n_layers = int(cfg.get("num_hidden_layers", cfg.get("n_layer", 0)))
    name_map = get_tensor_name_map(_arch_enum(f.architecture), n_layers)
    prefix = PREFIX.get(cfg["model_type"], "model.")
    out = {}
    for hf, (_, stored) in name_map.mapping.items():
        if not (hf.startswith(prefix) or hf == "lm_head"):
            continue
        for suffix in (".weight", ".bias"):
            if stored + suffix in f.tensors:
                out[hf + suffix] = stored + suffix
    return out


_OPENED = VersionCache(4)


def read_gguf(path: Path) -> GGUFFile:
    """The file's header, parsed once for each version of the file (a few are kept)."""
    path = Path(path)
    return _OPENED.get(path, lambda: GGUFFile(path))


def open_gguf(path: Path) -> tuple[GGUFFile, dict]:
    f = read_gguf(path)
    return f, gguf_config(f)
