"""Small random GGUF files, written as llama.cpp's converter writes them (``gguf.GGUFWriter``: the
``<arch>.*`` metadata keys, the ``tokenizer.ggml.*`` vocabulary and merges, ``blk.N.*`` tensor names from
gguf's own name map, LLaMA's q/k rows permuted, Gemma's norms stored as ``1 + w``, GPT-2's Conv1D weights
transposed), with 2-D weights quantized to Q8_0 so that dequantization is exercised.

``transformers`` reading the same file (``gguf_file=``) is the reference the tests compare with.
"""

from __future__ import annotations

import json

import numpy as np
import torch

# our model_type -> the GGUF architecture llama.cpp writes it under (when transformers reads it back)
GGUF_ARCH = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "phi3": "phi3",
             "gemma2": "gemma2", "gemma3_text": "gemma3", "starcoder2": "starcoder2", "gpt2": "gpt2",
             "stablelm": "stablelm", "falcon": "falcon"}  # fmt: skip
# any other family of the registry, written under the GGUF name llama.cpp gives it (or its own)
OTHER_ARCH = {"gpt_neox": "gptneox", "cohere": "command-r", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe",
              "gpt_oss": "gpt-oss", "phi": "phi2", "xlm-roberta": "bert", "modernbert": "modern-bert"}  # fmt: skip


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``LlamaModel.permute``."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _tokenizer_metadata(writer, tokenizer_json: str, add_bos: bool) -> None:
    tok = json.loads(tokenizer_json)
    vocab = dict(tok["model"]["vocab"])
    special = {}
    for added in tok["added_tokens"]:
        vocab[added["content"]] = added["id"]
        special[added["id"]] = added["special"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    assert [vocab[t] for t in tokens] == list(range(len(tokens)))
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if special.get(i) else 1 for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(len(tokens) - 1)
    writer.add_pad_token_id(1)  # "<pad>" (Phi-3's config class would say 32000, outside this vocabulary)
    writer.add_add_bos_token(add_bos)


def write_gguf(path, ref, model_type: str, tokenizer_json: str, quantize: bool = True) -> None:
    """Write transformers model ``ref`` (a causal LM) to ``path`` as llama.cpp would."""
    import gguf

    arch = GGUF_ARCH[model_type]
    c = ref.config
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("random")
    layers = c.num_hidden_layers
    w.add_block_count(layers)
    w.add_context_length(c.max_position_embeddings if model_type != "gpt2" else c.n_positions)
    w.add_embedding_length(c.hidden_size)
    heads = c.num_attention_heads
    w.add_head_count(heads)
    kv = getattr(c, "num_key_value_heads", None) or heads
    if model_type == "gpt2":
        w.add_feed_forward_length(c.n_inner or 4 * c.hidden_size)
        w.add_layer_norm_eps(c.layer_norm_epsilon)
    elif model_type == "falcon":
        w.add_feed_forward_length(c.ffn_hidden_size)
        w.add_head_count_kv(c.num_kv_heads if c.new_decoder_architecture else 1)
        w.add_layer_norm_eps(c.layer_norm_epsilon)
    else:
        w.add_feed_forward_length(c.intermediate_size)
        w.add_head_count_kv(kv)
    if model_type in ("falcon", "gpt2"):
        pass
    elif model_type == "starcoder2":
        w.add_layer_norm_eps(c.norm_epsilon)
    elif model_type == "stablelm":
        w.add_layer_norm_eps(c.layer_norm_eps)
        w.add_rope_dimension_count(int(c.rope_parameters["partial_rotary_factor"] * c.hidden_size // heads))
    else:
        w.add_layer_norm_rms_eps(c.rms_norm_eps)
        theta = (c.rope_parameters or {}).get("rope_theta") if hasattr(c, "rope_parameters") else None
        if theta is None:
            theta = getattr(c, "rope_theta", 10000.0)
        if isinstance(c.rope_parameters, dict) and "full_attention" in c.rope_parameters:
            theta = c.rope_parameters["full_attention"]["rope_theta"]
        w.add_rope_freq_base(float(theta))
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    w.add_vocab_size(c.vocab_size)
    if arch == "llama":
        w.add_rope_dimension_count(head_dim)
    if arch in ("gemma2", "gemma3"):
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_sliding_window(c.sliding_window)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantize else gguf.LlamaFileType.ALL_F32)
    _tokenizer_metadata(w, tokenizer_json, add_bos=True)

    name_map = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, _enum_name(arch)), layers)
    tied = "output.weight"
    for name, t in ref.state_dict().items():
        stored = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        if stored is None:
            continue
        if stored == tied and getattr(c, "tie_word_embeddings", False):
            continue
        data = t.detach().to(torch.float32).numpy().copy()
        if arch == "llama" and stored.endswith("attn_q.weight"):
            data = _permute(data, heads)
        elif arch == "llama" and stored.endswith("attn_k.weight"):
            data = _permute(data, kv)
        elif arch in ("gemma2", "gemma3") and "norm.weight" in stored:
            data = data + 1
        elif arch == "gpt2" and stored.endswith(("attn_qkv.weight", "ffn_down.weight", "ffn_up.weight",
                                                 "attn_output.weight")):  # fmt: skip
            data = np.ascontiguousarray(data.T)
        if quantize and data.ndim == 2 and data.shape[-1] % 32 == 0:
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(stored, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(stored, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _enum_name(arch: str) -> str:
    import gguf

    return next(k.name for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)


def write_other(path, arch: str) -> None:
    """A GGUF file of an architecture the explorer does not open (metadata and one tensor)."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
