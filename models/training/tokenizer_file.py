"""The character-level ``tokenizer.json``: one token per character, ``<s>`` prepended (as LLaMA's).

Built with the ``tokenizers`` library: a WordLevel model over single characters behind a
pre-tokenizer that splits every character off, a lowercasing normaliser (the model never saw
capitals), ``<unk>`` for anything else. Both the explorer (models/pretrained/tokenizer.py) and
transformers' ``PreTrainedTokenizerFast`` read it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from models.training.data import BOS, UNK, VOCAB


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(VOCAB)}, unk_token=UNK))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, VOCAB.index(BOS))])
    tok.add_special_tokens([BOS, UNK])
    return tok


def write_tokenizer(folder: Path) -> None:
    """tokenizer.json, and the tokenizer_config.json that lets AutoTokenizer open it."""
    build_tokenizer().save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "unk_token": UNK,
              "add_bos_token": True, "model_max_length": 256, "clean_up_tokenization_spaces": False}  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
