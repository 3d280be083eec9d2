"""The model's own tokenizer (tokenizer.json via the `tokenizers` library), so the axes show the
real tokens: ``[CLS]``, ``##ing``, ``Ġthe``, ``▁the``.

Special tokens come from the tokenizer's post-processor (BERT adds [CLS]/[SEP], LLaMA adds <s>,
GPT-2 adds nothing), exactly as the model saw them in training. Padding and truncation settings
stored in tokenizer.json are switched off: we trace one sentence and truncate it ourselves, keeping
the special tokens, so that the user can be told.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from models.config import InputError
from models.io.files import file_version


@dataclass(frozen=True)
class Encoded:
    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    type_ids: tuple[int, ...]
    notices: tuple[str, ...] = ()


# Parsing tokenizer.json holds the interpreter lock (~30 ms for a BERT vocabulary: `tokenizers` never
# releases it), which a window's thread waits out: the window reads it ahead of time (`read_ahead`, when
# its model list opens) and a load then finds it parsed. Keyed by the file's path, size and mtime.
_PARSED: OrderedDict[tuple, Tokenizer] = OrderedDict()
PARSED_KEPT = 8
_PARSED_LOCK = threading.Lock()


def _parsed(path: Path, data: bytes) -> Tokenizer:
    key = file_version(path)
    with _PARSED_LOCK:
        if key in _PARSED:
            _PARSED.move_to_end(key)
            return _PARSED[key]
    tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    if key is not None:
        with _PARSED_LOCK:
            _PARSED[key] = tokenizer
            while len(_PARSED) > PARSED_KEPT:
                _PARSED.popitem(last=False)
    return tokenizer


def forget_parsed() -> None:
    """Forget every tokenizer parsed ahead (a test that counts the parses starts with none)."""
    with _PARSED_LOCK:
        _PARSED.clear()


def read_ahead(folder: Path) -> bool:
    """Parse ``folder``'s tokenizer.json now (another thread's time), for a load to come; False when
    it cannot be read (the load will say why)."""
    try:
        ModelTokenizer(Path(folder) / "tokenizer.json")
    except (InputError, OSError):
        return False
    return True


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


class ModelTokenizer:
    def __init__(self, path: Path) -> None:
        from models.io import is_regular, read_bytes
        from models.io.jsonfile import MAX_JSON_BYTES

        if not is_regular(path):
            raise InputError(f"{path.parent} has no tokenizer.json (needed to split sentences)")
        data = read_bytes(path, "tokenizer", MAX_JSON_BYTES)  # a regular file of a bounded size
        try:
            self.tokenizer = _parsed(path, data)  # parsed ahead of time when the window could (read_ahead)
        except Exception as e:  # the Rust side raises plain Exceptions
            raise InputError(f"could not read {path}: {first_line(e)}") from e
        self.special = self.tokenizer.num_special_tokens_to_add(is_pair=False)

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> ModelTokenizer:
        """One built in memory (a GGUF file's, gguf_tokenizer.py) rather than read from tokenizer.json."""
        self = cls.__new__(cls)
        self.tokenizer = tokenizer
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.special = tokenizer.num_special_tokens_to_add(is_pair=False)
        return self

    def encode(self, sentence: str, limit: int, why: str = "the model's maximum") -> Encoded:
        """Tokenize one sentence, truncating it to ``limit`` tokens (special tokens included)."""
        if not isinstance(sentence, str) or not sentence.strip():
            raise InputError("the sentence is empty; type a few words")
        enc = self.tokenizer.encode(sentence, add_special_tokens=False)
        total = len(enc.ids) + self.special
        notices = ()
        if total > limit:
            if limit <= self.special:
                raise InputError(f"a limit of {limit} tokens leaves no room for the sentence")
            enc.truncate(limit - self.special)
            notices = (
                f"Sentence truncated: {total} tokens, but {why} is {limit}; "
                f"only the first {limit} are traced.",
            )
        enc = self.tokenizer.post_process(enc, None, add_special_tokens=True)
        if not enc.ids:
            raise InputError("the sentence produced no tokens")
        return Encoded(tuple(enc.tokens), tuple(enc.ids), tuple(enc.type_ids), notices)

    def token(self, token_id: int) -> str:
        """The token's text as the axes show it (``Ġthe``), or ``<id N>`` if it has none."""
        text = self.tokenizer.id_to_token(int(token_id))
        return f"<id {int(token_id)}>" if text is None else text

    def decode(self, ids, skip_special: bool = False) -> str:
        """Token ids back to text (special tokens kept unless ``skip_special``: an end token
        shows where generation stopped)."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special)
