"""Small random encoder-decoder models built with transformers, saved with a tokenizer.json, for tests.

Each family is built from a tiny config at random (``from_config``), its 1-D parameters (norms,
biases) nudged so that they bite, saved with ``save_pretrained`` beside a WordLevel tokenizer.json
whose post-processor adds the family's special tokens (T5: ``$A </s>``; BART, Marian: ``<s> $A </s>``).
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from zoo import table

SOURCE = "the cat sat on the mat while a dog was walking in the park and the bird sang"
TARGET = "die katze sass auf der matte"
WORDS = sorted(set((SOURCE + " " + TARGET + " hello world").split()))
SPECIALS = ["<pad>", "</s>", "<unk>", "<s>"]

FAMILIES = table("encdec_refs")  # name: zoo Case (tests/models/zoo.py)


def make_tokenizer(t5_style: bool) -> Tokenizer:
    vocab = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    single = "$A </s>" if t5_style else "<s> $A </s>"
    tok.post_processor = processors.TemplateProcessing(single=single, special_tokens=[("<s>", 3), ("</s>", 1)])
    return tok


def make_unigram_tokenizer() -> Tokenizer:
    """A SentencePiece-style tokenizer as T5's tokenizer.json is: Unigram pieces with ``▁`` marking a
    word's start (Metaspace), ``</s>`` appended by the post-processor, ids 0-2 for <pad> </s> <unk>."""
    from tokenizers import decoders, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=60, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>")
    tok.train_from_iterator([SOURCE, TARGET, "hello world"] * 8, trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tok


def build(folder, name: str, tok: Tokenizer | None = None):
    """Save family ``name`` to ``folder``; returns (transformers model, tokenizer)."""
    import transformers

    model_type, cls_name, kwargs, _ = FAMILIES[name]
    torch.manual_seed(0)
    tok = tok or make_tokenizer(model_type in ("t5", "mt5"))
    config = getattr(transformers, cls_name)(vocab_size=tok.get_vocab_size(), **kwargs)
    model = transformers.AutoModelForSeq2SeqLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 1:
                param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    loaded = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    return loaded, tok


def reference(model, tok: Tokenizer, source: str = SOURCE, target: str = TARGET):
    """One forward pass with the target's ids as decoder input ids, as BertViz does."""
    src = torch.tensor([tok.encode(source).ids])
    tgt = torch.tensor([tok.encode(target).ids])
    with torch.no_grad():
        return model(input_ids=src, decoder_input_ids=tgt, output_attentions=True, output_hidden_states=True)
