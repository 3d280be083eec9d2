"""Random causal language models of every decoder family, built with transformers for the
generation tests (a model with its head, saved with ``save_pretrained``, plus a BPE tokenizer)."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

PROMPT = "the cat sat on the mat while a dog"
CORPUS = [
    "the cat sat on the mat",
    "a dog is walking in the park",
    "attention is all you need",
    "hello world, the cats and the dogs",
] * 4
WINDOW = 4  # shorter than the final sequence: the sliding windows bite
NEW_TOKENS = 10

SMALL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
             max_position_embeddings=40, initializer_range=0.2)  # fmt: skip

# name: (model_type, config class, kwargs)
FAMILIES = {
    "gpt2": ("gpt2", "GPT2Config", dict(n_embd=32, n_layer=3, n_head=4, n_positions=40,
                                        initializer_range=0.3)),
    "gpt_neox-parallel": ("gpt_neox", "GPTNeoXConfig", dict(SMALL, rotary_pct=0.5)),
    "gpt_neox-sequential": ("gpt_neox", "GPTNeoXConfig",
                            dict(SMALL, rotary_pct=0.25, use_parallel_residual=False)),
    "llama-gqa": ("llama", "LlamaConfig", dict(SMALL, num_key_value_heads=2)),
    "llama-tied": ("llama", "LlamaConfig", dict(SMALL, num_key_value_heads=1, tie_word_embeddings=True)),
    "mistral-window": ("mistral", "MistralConfig", dict(SMALL, num_key_value_heads=2, sliding_window=WINDOW)),
    "qwen2-bias-window": ("qwen2", "Qwen2Config", dict(SMALL, num_key_value_heads=2, use_sliding_window=True,
                                                       sliding_window=WINDOW, max_window_layers=1)),
    "qwen3-qknorm": ("qwen3", "Qwen3Config", dict(SMALL, num_key_value_heads=2, head_dim=16)),
    "gemma": ("gemma", "GemmaConfig", dict(SMALL, num_key_value_heads=1, head_dim=16)),
    "gemma2-softcaps-window": ("gemma2", "Gemma2Config",
                               dict(SMALL, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
                                    attn_logit_softcapping=1.5, final_logit_softcapping=2.0,
                                    sliding_window=WINDOW)),
    "phi3-partial-window": ("phi3", "Phi3Config",
                            dict(SMALL, num_key_value_heads=2, sliding_window=WINDOW + 1, pad_token_id=0,
                                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                  "partial_rotary_factor": 0.5})),
}  # fmt: skip


def make_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<s>", "<pad>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return tok


def build(transformers, folder, name, eos: int | None = None):
    """Save a random causal LM of family ``name`` into ``folder``; return transformers' model
    read back from it (eager attention). ``eos``: the end token (default: one never produced)."""
    from zoo import ZOO

    _, cls_name, kwargs = ZOO[name]
    if "max_position_embeddings" in kwargs:  # room for the prompt and every new token
        kwargs = dict(kwargs, max_position_embeddings=max(40, kwargs["max_position_embeddings"]))
    torch.manual_seed(0)
    tok = make_tokenizer()
    vocab = tok.get_vocab_size()
    config = getattr(transformers, cls_name)(vocab_size=vocab, **kwargs)
    config.eos_token_id = vocab + 5 if eos is None else eos  # outside the vocabulary: never met
    config.bos_token_id = 0
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():  # biases and norm weights start at 0 or 1: make them bite
        for param in model.parameters():
            if param.dim() == 1:
                param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


def final_norm(ref):
    """transformers' steps after the last block of a causal LM, before the unembedding: its final
    norm (if any) and OPT's projection out of the hidden size."""
    base = ref.base_model
    base = getattr(base, "decoder", base)  # OPT keeps its layers in a decoder
    names = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "project_out")
    steps = [getattr(base, name) for name in names if getattr(base, name, None) is not None]
    assert steps or getattr(ref.config, "do_layer_norm_before", True) is False, type(base).__name__

    def run(hidden):
        for step in steps:
            hidden = step(hidden)
        return hidden

    return run


def lens_logits(ref, hidden):
    """Final norm + unembedding (+ Granite's scaling, Gemma 2's final soft-cap) of transformers' hidden states."""
    logits = ref.get_output_embeddings()(final_norm(ref)(hidden))
    logits = logits / getattr(ref.config, "logits_scaling", 1.0)  # Granite
    logits = logits * getattr(ref.config, "logit_scale", 1.0)  # Cohere
    cap = getattr(ref.config, "final_logit_softcapping", None)
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return logits
