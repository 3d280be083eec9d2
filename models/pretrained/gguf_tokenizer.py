"""The tokenizer a GGUF file describes (``tokenizer.ggml.*``), built as a ``tokenizers`` Tokenizer the way
``transformers`` builds it from the same file (``integrations/gguf/gguf_tokenizer_mapping.py``), so that
a sentence gets the same ids here as from ``AutoTokenizer.from_pretrained(folder, gguf_file=...)``.

A byte-level BPE (``tokenizer.ggml.model = "gpt2"``: GPT-2, SmolLM, Qwen, LLaMA 3) is built from the
vocabulary and merges, split by the pre-tokenizer the file names (``tokenizer.ggml.pre``); the tokens the
file marks as control become special tokens, the user-defined ones added tokens, and a BOS is put in
front when ``tokenizer.ggml.add_bos_token`` says so.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from models.config import InputError
from models.io.files import VersionCache
from models.pretrained.gguf_sentencepiece import sentencepiece_tokenizer

CONTROL, USER_DEFINED = 3, 4

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT4O_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# tokenizer.ggml.pre -> the split its merges were learned with (transformers' GGUF_PRE_TOKENIZER_SPLITS);
# any other name keeps GPT-2's own byte-level split
SPLITS = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                     "jina-v5-nano", "dbrx", "smaug-bpe"), _LLAMA3_SPLIT),
    "tekken": _TEKKEN_SPLIT,
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"), _QWEN2_SPLIT),
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), _GPT4O_SPLIT),
}  # fmt: skip


@lru_cache(maxsize=1)
def byte_alphabet() -> dict[int, str]:
    """GPT-2's printable spelling of each byte (``bytes_to_unicode``)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


# Built tokenizers by file version: Gemma 3's 262,144 tokens take seconds (its merges are recovered from
# the vocabulary), paid once per file, not at every open
_BUILT = VersionCache(4)  # Gemma 3's 262,144 tokens take seconds (their merges): once per file


def file_tokenizer(path: Path) -> Tokenizer:
    """The tokenizer of the GGUF file at ``path``, built once for each version of the file."""
    from models.pretrained.gguf_config import read_gguf

    path = Path(path)
    return _BUILT.get(path, lambda: gguf_tokenizer(read_gguf(path).metadata, path.name))


def gguf_tokenizer(metadata: dict, name: str) -> Tokenizer:
    """The file's tokenizer; one :class:`InputError` line when it describes one that cannot be built."""
    kind = metadata.get("tokenizer.ggml.model")
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise InputError(f"{name} has no vocabulary (tokenizer.ggml.tokens) in its metadata")
    if kind == "gpt2":
        tok = _byte_level(metadata, tokens, name)
        alphabet = set(byte_alphabet().values())
    elif kind == "llama":
        arch = metadata.get("general.architecture")
        tok = sentencepiece_tokenizer(metadata, tokens, arch if isinstance(arch, str) else "", name)
        alphabet = None
    else:
        raise InputError(
            f"{name}: GGUF tokenizer {kind!r} is not supported; supported: gpt2 (byte-level BPE), llama (SentencePiece)"
        )
    _added_tokens(tok, metadata, tokens, alphabet)
    _post_processor(tok, metadata, tokens, bos_default=kind == "llama")
    return tok


def _byte_level(metadata: dict, tokens: list[str], name: str) -> Tokenizer:
    spelling = byte_alphabet()
    alphabet = set(spelling.values())
    vocab = {
        (t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8"))): i for i, t in enumerate(tokens)
    }
    merges = metadata.get("tokenizer.ggml.merges")
    if not isinstance(merges, list):
        raise InputError(f"{name}: a byte-level BPE vocabulary without merges (tokenizer.ggml.merges)")
    pairs = []
    for m in merges:
        parts = m.split(" ")
        if len(parts) != 2:
            raise InputError(f"{name}: merge {m!r} is not two tokens")
        pairs.append((parts[0], parts[1]))
    try:
        model = models.BPE(vocab, pairs, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False,
                           byte_fallback=False)  # fmt: skip
    except Exception as e:  # the Rust side raises plain Exceptions
        raise InputError(f"{name}: could not build its tokenizer: {e}") from e
    tok = Tokenizer(model)
    split = SPLITS.get(metadata.get("tokenizer.ggml.pre"))
    if split is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(split), behavior="isolated"),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]  # fmt: skip
        )
    tok.decoder = decoders.ByteLevel()
    return tok


def _added_tokens(tok: Tokenizer, metadata: dict, tokens: list[str], alphabet: set[str] | None) -> None:
    """The tokens the file marks as control become special tokens (in a byte-level vocabulary only those
    spelled in its byte alphabet: any other is a mislabel of llama.cpp's), the user-defined ones plain
    added tokens, and the BOS/EOS/unknown/padding tokens the file names special ones: transformers' order."""
    types = metadata.get("tokenizer.ggml.token_type") or ()
    control = [AddedToken(t, normalized=False, special=True)
               for t, k in zip(tokens, types) if k == CONTROL and (alphabet is None or set(t) <= alphabet)]  # fmt: skip
    if control:
        tok.add_special_tokens(control)
    vocab = tok.get_vocab()
    user = [AddedToken(t, normalized=False, special=False)
            for t, k in zip(tokens, types) if k == USER_DEFINED and t in vocab]  # fmt: skip
    if user:
        tok.add_tokens(user)
    named = [metadata.get(f"tokenizer.ggml.{key}") for key in ("bos_token_id", "eos_token_id", "unknown_token_id",
                                                                 "padding_token_id")]  # fmt: skip
    named = [tokens[i] for i in named if isinstance(i, int) and 0 <= i < len(tokens)]
    added = {t.content for t in tok.get_added_tokens_decoder().values()}
    missing = [AddedToken(t, special=True) for t in dict.fromkeys(named) if t not in added]
    if missing:
        tok.add_tokens(missing)


def _post_processor(tok: Tokenizer, metadata: dict, tokens: list[str], bos_default: bool) -> None:
    """BOS before the sentence (EOS after it) when the file says so, as transformers' tokenizer adds them
    (a SentencePiece file that does not say gets a BOS, as llama.cpp gives it one)."""
    single, special = ["$A"], []
    for flag, key, at in (("add_bos_token", "bos_token_id", 0), ("add_eos_token", "eos_token_id", None)):
        token_id = metadata.get(f"tokenizer.ggml.{key}")
        wanted = metadata.get(f"tokenizer.ggml.{flag}", bos_default if at == 0 else False)
        if wanted is True and isinstance(token_id, int) and 0 <= token_id < len(tokens):
            text = tokens[token_id]
            single.insert(0, text) if at == 0 else single.append(text)
            special.append((text, token_id))
    tok.post_processor = processors.TemplateProcessing(single=single, special_tokens=special)
