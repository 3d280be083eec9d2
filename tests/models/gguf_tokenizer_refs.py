"""Small GGUF files holding only a tokenizer (and the few hyper-parameters transformers' config needs to
pick the tokenizer class), one per kind of tokenizer llama.cpp writes: byte-level BPE (``gpt2``) and
SentencePiece (``llama``) as LLaMA, Gemma and Phi-3 files spell it. The SentencePiece vocabularies are
trained here (``tokenizers``' BPE trainer on a ``▁``-marked corpus) and written as llama.cpp's converter
writes a ``tokenizer.model``: control tokens, the 256 byte tokens ``<0x00>``…, the pieces by rank with
their scores, Gemma's runs of spaces as real spaces; with or without merges."""

from __future__ import annotations

import numpy as np
from generate_refs import make_tokenizer
from gguf_refs import _tokenizer_metadata

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran away.",
    "Attention heads look at previous tokens, at the first token, and at earlier copies of a word.",
    "naïve café déjà vu señor Straße, digits 1234567890 and code: def f(x): return x ** 2",
    "  two spaces,   three spaces,    four spaces\n\nand newlines\n",
] * 20
# kind -> (GGUF architecture, special tokens in id order, the BOS, EOS, unknown and padding ids)
KINDS = {
    "llama": ("llama", ["<unk>", "<s>", "</s>"], (1, 2, 0, None)),
    "llama-merges": ("llama", ["<unk>", "<s>", "</s>"], (1, 2, 0, None)),
    "gemma": ("gemma3", ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"], (2, 1, 3, 0)),
    "phi3": ("phi3", ["<unk>", "<s>", "</s>"], (1, 2, 0, None)),
}
BYTE, CONTROL, USER_DEFINED, NORMAL, UNKNOWN = 6, 3, 4, 1, 2


def _pieces(gemma: bool) -> tuple[list[str], list[tuple[str, str]]]:
    """Trained pieces (best first) and their merges, over text whose spaces are ``▁``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = (pre_tokenizers.Split(" ", behavior="merged_with_previous") if gemma
                         else pre_tokenizers.Metaspace(prepend_scheme="first"))  # fmt: skip
    corpus = [t.replace(" ", "\u2581") for t in CORPUS] if gemma else CORPUS
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, show_progress=False))
    vocab = tok.get_vocab()
    pieces = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    import json

    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in
              json.loads(tok.to_str())["model"]["merges"]]  # fmt: skip
    return pieces, merges


def write_tokenizer_gguf(path, kind: str) -> None:
    """A GGUF file of ``kind`` (a key of KINDS, or "gpt2"): its tokenizer and a model's shape, no tensors."""
    import gguf

    arch = "llama" if kind == "gpt2" else KINDS[kind][0]
    w = gguf.GGUFWriter(str(path), arch)
    for add, value in (("block_count", 1), ("context_length", 64), ("embedding_length", 8),
                       ("feed_forward_length", 16), ("head_count", 2), ("head_count_kv", 2)):  # fmt: skip
        getattr(w, f"add_{add}")(value)
    w.add_layer_norm_rms_eps(1e-6)
    if kind == "gpt2":
        _tokenizer_metadata(w, make_tokenizer().to_str(), add_bos=True)
    else:
        _sentencepiece_metadata(w, kind)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _sentencepiece_metadata(w, kind: str) -> None:
    _, specials, (bos, eos, unk, pad) = KINDS[kind]
    gemma = kind == "gemma"
    pieces, merges = _pieces(gemma)
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    trained = [p for p in pieces if p not in byte_tokens and len(p) > 1]
    singles = [p for p in pieces if len(p) == 1]
    tokens = [*specials, *byte_tokens, *singles, *trained, "<custom>"]
    types = [CONTROL] * len(specials) + [BYTE] * 256 + [NORMAL] * (len(singles) + len(trained)) + [USER_DEFINED]
    types[unk] = UNKNOWN if not gemma else CONTROL
    scores = [0.0] * (len(specials) + 256) + [-float(i) for i in range(len(singles) + len(trained))] + [0.0]
    if gemma:  # llama.cpp writes Gemma's runs of spaces as spaces
        tokens = [" " * len(t) if t and set(t) == {"\u2581"} and len(t) > 1 else t for t in tokens]
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    if kind == "llama-merges":
        w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_unk_token_id(unk)
    if pad is not None:
        w.add_pad_token_id(pad)
    if kind != "llama":  # a Llama-2 file that does not say gets a BOS all the same
        w.add_add_bos_token(True)
    w.add_add_eos_token(False)
