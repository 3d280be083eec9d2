"""A GGUF file's tokenizer, of every kind llama.cpp writes (byte-level BPE; SentencePiece as LLaMA, Gemma and
Phi-3 spell it, with or without merges), gives the same ids as transformers' AutoTokenizer reading the same
file (``gguf_file=``) on texts with accents, CJK, emoji, runs of spaces and newlines; the decoded text too."""

from __future__ import annotations

import pytest
from gguf_tokenizer_refs import KINDS, write_tokenizer_gguf
from tokenizer_texts import TEXTS

from models.config import InputError
from models.pretrained.gguf_config import read_gguf
from models.pretrained.gguf_tokenizer import file_tokenizer, gguf_tokenizer

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")


@pytest.fixture(scope="module", params=["gpt2", *KINDS])
def kind(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(f"tok-{request.param}") / "tok.gguf"
    write_tokenizer_gguf(path, request.param)
    ref = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    return request.param, path, ref


def test_ids_and_text_equal_transformers(kind):
    name, path, ref = kind
    ours = file_tokenizer(path)
    for text in (*TEXTS, "<custom> and <s> in text", "<bos><eos> words"):
        want = ref(text).input_ids
        assert ours.encode(text).ids == want, (name, text)
        assert ours.decode(want, skip_special_tokens=False) == ref.decode(want), (name, text)
    fallback = ours.encode("🙂").tokens
    if name != "gpt2":  # a character outside the vocabulary falls back to its UTF-8 bytes
        assert "<0xF0>" in fallback


def test_the_built_tokenizer_is_kept_per_file_version(kind):
    _, path, _ = kind
    assert file_tokenizer(path) is file_tokenizer(path)


def test_a_sentencepiece_file_without_merges_or_scores_is_refused(kind):
    name, path, _ = kind
    if name not in ("llama",):
        return
    metadata = dict(read_gguf(path).metadata)
    metadata.pop("tokenizer.ggml.scores")
    with pytest.raises(InputError, match="neither merges nor scores"):
        gguf_tokenizer(metadata, "x.gguf")
    with pytest.raises(InputError, match="GGUF tokenizer 'rwkv' is not supported"):
        gguf_tokenizer({**metadata, "tokenizer.ggml.model": "rwkv"}, "x.gguf")
