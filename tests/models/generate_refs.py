"""Random causal language models of every decoder family, built with transformers for the
generation tests (a model with its head, saved with ``save_pretrained``, plus a BPE tokenizer)."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from zoo import WINDOW, ZOO, table  # noqa: F401  (WINDOW: the generation tests' window)

PROMPT = "the cat sat on the mat while a dog"
CORPUS = [
    "the cat sat on the mat",
    "a dog is walking in the park",
    "attention is all you need",
    "hello world, the cats and the dogs",
] * 4

NEW_TOKENS = 10

FAMILIES = table("generate_refs")  # name: zoo Case (tests/models/zoo.py)


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
    _, cls_name, kwargs, _ = ZOO[name]  # any decoder of the zoo, built as a causal LM
    if "max_position_embeddings" in kwargs:  # room for the prompt and every new token
        kwargs = dict(kwargs, max_position_embeddings=max(40, kwargs["max_position_embeddings"]))
    torch.manual_seed(0)
    tok = make_tokenizer()
    vocab = tok.get_vocab_size()
    config = getattr(transformers, cls_name)(vocab_size=vocab, **kwargs)
    config.eos_token_id = vocab + 5 if eos is None else eos  # outside the vocabulary: never met
    config.bos_token_id = 0
    return save_random(transformers, folder, config, tok)


def save_random(transformers, folder, config, tok, impl: str = "eager"):
    """A random causal LM of ``config`` (its 1-d weights moved off 0 and 1) and ``tok`` saved into
    ``folder``; transformers' model read back from it with attention ``impl``."""
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=impl).eval()
    with torch.no_grad():  # biases and norm weights start at 0 or 1: make them bite
        for param in model.parameters():
            if param.dim() == 1:
                param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation=impl).eval()


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
