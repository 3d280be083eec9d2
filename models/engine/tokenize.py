"""Sentence -> tokens -> ids -> embeddings, as in the study notes' worked example.

Words and punctuation are tokens; CJK characters are one token each; emoji (with their
modifiers and zero-width joiners) and other symbols stay whole and are never dropped.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from typing import TYPE_CHECKING

import numpy as np

from models.config import InputError

if TYPE_CHECKING:
    import torch

# CJK ideographs, kana, hangul and fullwidth forms: one character per token.
_CJK = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f"
)
# A symbol (or a flag's pair of regional indicators, or a keycap) followed by variation
# selectors, skin-tone modifiers, tag characters (subdivision flags) and ZWJ-joined symbols.
_SYMBOL = (
    r"(?:[\U0001f1e6-\U0001f1ff]{2}|[#*0-9]\ufe0f?\u20e3|[^\w\s])"
    r"(?:[\ufe0e\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]|\u200d[^\w\s])*"
)
_TOKEN = re.compile(rf"[{_CJK}]|{_SYMBOL}|[^\W{_CJK}]+")


def tokenize(sentence: str) -> list[str]:
    """Split a sentence into word, punctuation, CJK-character and symbol tokens.

    Combining marks (Devanagari vowel signs and viramas, a separately typed accent) are not
    word characters to ``re``; they stay attached to the token they follow.
    """
    return list(_tokens(sentence))


@functools.lru_cache(maxsize=16)
def _tokens(sentence: str) -> tuple[str, ...]:
    """The tokens, remembered: the window asks for the same sentence's several times per change
    (its state, the request, a painted mask), and 16,384 words take ~60 ms to split."""
    tokens: list[str] = []
    end = -1
    for match in _TOKEN.finditer(sentence):
        text = match.group()
        # a word broken by a virama or vowel sign goes on after it (only asked of touching tokens: 0.3 s
        # of 131,072 words apart)
        if tokens and match.start() == end and (
            _is_mark(text[0]) or (_is_mark(tokens[-1][-1]) and tokens[-1][0].isalnum() and text[0].isalnum())
        ):
            tokens[-1] += text
        else:
            tokens.append(text)
        end = match.end()
    return tuple(tokens)


def _is_mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


def word_seed(token: str) -> int:
    """A word's own 64-bit number (BLAKE2b of its UTF-8 bytes): the same on every machine and run."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def word_vector(token: str, d_model: int, seed: int) -> np.ndarray:
    """``(d_model,)`` float32 drawn from N(0, 1), as ``torch.nn.Embedding`` draws its rows, from a
    generator seeded by ``seed`` and the word alone: the word has this vector in every sentence
    (a table over the sentence's sorted words gave "cat" another row whenever a word was added
    before it, which spoilt "change one word and see"). A wider ``d_model`` extends the same vector."""
    rng = np.random.default_rng([seed % 2**63, word_seed(token)])
    return rng.standard_normal(d_model, dtype=np.float32)


def embed_words(sentences: list[list[str]], d_model: int, seed: int) -> list[torch.Tensor]:
    """Each sentence's ``(n, d_model)`` rows: every token's :func:`word_vector` (each distinct word
    drawn once). Never touches torch's global random state."""
    import torch  # here: the state's token preview imports this module without torch

    rows: dict[str, int] = {}  # each distinct word's row of the table
    for tokens in sentences:
        for token in tokens:
            rows.setdefault(token, len(rows))
    table = np.empty((len(rows), d_model), dtype=np.float32)
    for token, row in rows.items():
        table[row] = word_vector(token, d_model, seed)
    # one gather from the table (stacking 131,072 rows one by one took 1.1 s, fancy indexing 1.4 s, take 0.14 s)
    return [torch.from_numpy(np.take(table, np.fromiter((rows[t] for t in tokens), np.int64, len(tokens)), axis=0))
            for tokens in sentences]  # fmt: skip


def tokens_or_error(sentence: str | None, max_tokens: int, what: str = "sentence") -> list[str]:
    tokens = tokenize(sentence or "")
    if not tokens:
        raise InputError(f"the {what} is empty: type at least one word")
    if len(tokens) > max_tokens:
        raise InputError(f"the {what} has {len(tokens)} tokens, more than the limit of {max_tokens}")
    return tokens


def check_embeddings(matrix: np.ndarray, d_model: int, max_tokens: int, what: str) -> np.ndarray:
    """Validate a user-supplied ``(n, d_model)`` embeddings matrix and return it as float32."""
    m = np.asarray(matrix)
    if m.ndim != 2:
        raise InputError(f"{what} must be a 2-D matrix (n x d_model), got shape {m.shape}")
    if m.shape[0] == 0:
        raise InputError(f"{what} has no rows: supply at least one token")
    if m.shape[0] > max_tokens:
        raise InputError(f"{what} has {m.shape[0]} rows, more than the limit of {max_tokens}")
    if m.shape[1] != d_model:
        raise InputError(f"{what} has {m.shape[1]} columns but d_model is {d_model}")
    from models.checks import finite_float32

    return finite_float32(m, what)  # real, finite, and within float32's range
