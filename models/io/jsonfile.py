"""JSON from a user's file (config.json, tokenizer.json, a manifest, a session's document):
size, nesting depth, number length and the top-level type checked; NaN and Infinity refused.

Python's ``json`` accepts ``1e999`` (as inf), ``NaN``, 100,000-digit integers (then fails to
convert them later) and nests as deep as its recursion limit; each of those became a traceback
somewhere. Here each is one :class:`InputError` line naming the file.
"""

from __future__ import annotations

import json
import math
import os

from models.config import InputError
from models.io.files import read_bytes

MAX_JSON_BYTES = 64 << 20  # tokenizer.json of a large vocabulary is ~10-20 MB
MAX_DEPTH = 64
MAX_NUMBER_CHARS = 64


class _Refused(ValueError):
    pass


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number with {len(text):,} digits")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number of {len(text):,} characters")
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:20]} beyond the range of a float")
    return value


def _constant(name: str):
    raise _Refused(f"{name}, which is not a JSON number")


def _depth(value, limit: int) -> int:
    """The nesting depth of ``value`` (iterative: a deep document cannot overflow the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json(data: bytes | str, what: str, expect: type | None = dict, max_depth: int = MAX_DEPTH,
               allow_nan: bool = False):
    """``data`` parsed, or one InputError line starting with ``what`` ("cannot read X.json").
    ``allow_nan``: NaN, Infinity and 1e999 are read as floats, for a reader whose checks name
    the field they are in (config.json: "layer_norm_eps must be a positive number, got nan")."""
    hooks = {"parse_int": _int, "parse_float": _float, "parse_constant": _constant}
    if allow_nan:
        hooks = {"parse_int": _int, "parse_float": _any_float}
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        value = json.loads(text, **hooks)
    except UnicodeDecodeError:
        raise InputError(f"{what}: not UTF-8 text") from None
    except _Refused as exc:
        raise InputError(f"{what}: it holds {exc}") from None
    except RecursionError:
        raise InputError(f"{what}: JSON nested too deeply (more than {max_depth} levels)") from None
    except ValueError as exc:  # json.JSONDecodeError and int()'s own limits
        raise InputError(f"{what}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    if _depth(value, max_depth) > max_depth:
        raise InputError(f"{what}: JSON nested too deeply (more than {max_depth} levels)")
    if expect is not None and not isinstance(value, expect):
        kind = {dict: "a JSON object", list: "a JSON list"}.get(expect, expect.__name__)
        raise InputError(f"{what}: not {kind}")
    return value


def _any_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number of {len(text):,} characters")
    return float(text)


def read_json(path: str | os.PathLike, what: str, expect: type | None = dict, limit: int = MAX_JSON_BYTES,
              prefix: str | None = None, allow_nan: bool = False):
    """A JSON file (a regular file of at most ``limit`` bytes), checked as :func:`parse_json`;
    messages start with ``prefix`` (default "cannot read <what> <path>")."""
    data = read_bytes(path, what, limit)
    return parse_json(data, prefix or f"cannot read {what} {path}", expect, allow_nan=allow_nan)
