"""A SentencePiece vocabulary stored in a GGUF file (``tokenizer.ggml.model = "llama"``: LLaMA 1/2, Mistral,
TinyLlama, Gemma, Phi-3), built as a ``tokenizers`` BPE with byte fallback exactly as ``transformers``'
GGUF loader builds it (``integrations/gguf/gguf_tokenizer_mapping.py``: ``sentencepiece_tokenizer``,
``gemma_tokenizer``, ``phi3_tokenizer`` and the Llama/Gemma tokenizer classes they hand the vocabulary to).

- the merges are the file's, or (llama.cpp writes none for SentencePiece) recovered from the vocabulary:
  every split of a token into two tokens of the vocabulary, best first by the token's score
  (``transformers.tokenization_utils_base.generate_merges``);
- LLaMA-style: a ``▁`` put before the first word (``Metaspace``, prepend "first"), no normalizer;
- Gemma: spaces become ``▁`` (a normalizer) and the text is cut after each one; a token of two or more
  spaces, which the file stores as real spaces, is spelled with ``▁``; the merges follow the order of
  the tokens in the file (Gemma's scores do not follow its merge order);
- Phi-3: the ``▁`` prefix and the spaces come from a normalizer, with no pre-tokenizer.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

from models.config import InputError

SPACE = "\u2581"
GEMMA = ("gemma", "gemma2", "gemma3")
# the special tokens each tokenizer class of transformers adds (its defaults), then the file's own
_CLASS_SPECIALS = {
    "llama": ("<unk>", "<s>", "</s>"),
    "gemma": ("<unk>", "<bos>", "<eos>", "<pad>", "<mask>"),
}


def generate_merges(vocab: dict[str, int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """Every split of a token into two tokens of ``vocab``, best score first (ties: shorter left part,
    then shorter right part, first), each token's splits by the halves' ids: transformers' order."""
    merges = []
    for merge, score in scores.items():
        local = []
        for index in range(1, len(merge)):
            left, right = merge[:index], merge[index:]
            if left in vocab and right in vocab:
                local.append((left, right, score))
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(m[0], m[1]) for m in merges]


def _merges(metadata: dict, vocab: dict[str, int], scores: dict[str, float] | None, name: str):
    merges = metadata.get("tokenizer.ggml.merges")
    if isinstance(merges, list):
        out = [tuple(m.split(" ")) for m in merges]
        if any(len(m) != 2 for m in out):
            raise InputError(f"{name}: a merge of tokenizer.ggml.merges is not two tokens")
        return out
    if scores is None:
        raise InputError(f"{name}: a SentencePiece vocabulary with neither merges nor scores (tokenizer.ggml.scores)")
    return generate_merges(vocab, scores)


def sentencepiece_tokenizer(metadata: dict, tokens: list[str], architecture: str, name: str) -> Tokenizer:
    """The file's SentencePiece vocabulary as a BPE with byte fallback (added tokens not yet added)."""
    gemma = architecture in GEMMA
    if gemma:
        tokens = [SPACE * len(t) if " " in t and not t.strip() else t for t in tokens]
        scores: dict[str, float] | None = {t: -i for i, t in enumerate(tokens)}
    else:
        raw = metadata.get("tokenizer.ggml.scores")
        scores = dict(zip(tokens, raw)) if isinstance(raw, list) and len(raw) == len(tokens) else None
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = _merges(metadata, vocab, scores, name)
    unk = {"unk_token": "<unk>"} if gemma else {}  # transformers' LlamaTokenizer gives its BPE no unknown token
    try:
        bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True, dropout=None, **unk)
    except Exception as e:  # the Rust side raises plain Exceptions
        raise InputError(f"{name}: could not build its tokenizer: {e}") from e
    tok = Tokenizer(bpe)
    pieces = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if gemma:
        tok.normalizer = normalizers.Replace(" ", SPACE)
        tok.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
    elif architecture == "phi3":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
        pieces.append(decoders.Strip(content=" ", left=1))
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
        pieces.append(decoders.Strip(content=" ", left=1))
    tok.decoder = decoders.Sequence(pieces)
    defaults = _CLASS_SPECIALS["gemma" if gemma else "llama"]
    tok.add_tokens([AddedToken(t, special=True) for t in defaults])
    return tok
