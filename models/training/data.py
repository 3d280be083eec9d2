"""The training text, made here from a seed (nothing is downloaded).

Character-level: every character is one token. A sequence is ``<s>`` followed by segments, each a
block of random characters, sometimes a short gap of other random characters, then the block again.
The first copy cannot be predicted (it is random); the second copy can, from its second character
on, by a head that finds the earlier occurrence of the current character and copies what came next:
the setting in which Olsson et al. (2022) saw induction heads form in a phase change.

``repeated`` marks the targets inside a second copy (its first character excluded: nothing tells
the model where a copy starts), over which the "repeated-block loss" is taken.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

BOS, UNK = "<s>", "<unk>"
# Every character the model reads; random blocks are drawn from all of them.
CHARACTERS = " " + string.ascii_lowercase + string.digits + ".,'-!?"
VOCAB = (BOS, UNK, *CHARACTERS)
CHAR_IDS = {c: i for i, c in enumerate(VOCAB)}
FIRST_CHAR_ID = 2


@dataclass(frozen=True)
class DataConfig:
    seq_len: int = 64  # tokens per sequence, <s> included
    min_block: int = 6
    max_block: int = 30
    max_gap: int = 4  # random characters between a block and its copy (half the time none)
    max_prefix: int = 16  # random characters before the first block
    text_share: float = 0.1  # share of segments that are "text" (see text_stretch), not blocks


@dataclass(frozen=True)
class Batch:
    ids: np.ndarray  # (B, T) int64, ids[:, 0] = <s>
    repeated: np.ndarray  # (B, T - 1) bool: target ids[:, t + 1] lies inside a second copy


def skip_table(seed: int) -> np.ndarray:
    """``(V,)``: in the "text" stretches the character after next is ``table[current]``."""
    rng = np.random.default_rng([seed, 3])
    table = np.arange(len(VOCAB))
    table[FIRST_CHAR_ID:] = rng.permutation(np.arange(FIRST_CHAR_ID, len(VOCAB)))
    return table


def text_stretch(rng: np.random.Generator, table: np.ndarray, length: int) -> list[int]:
    """Characters in which each is fixed by the one two places before (``table``): predicting the
    next character needs the previous one, so a head that looks one back pays off on its own,
    and induction heads are built on such a head."""
    out = list(rng.integers(FIRST_CHAR_ID, len(VOCAB), size=2))
    while len(out) < length:
        out.append(int(table[out[-2]]))
    return out[:length]


def sequence(rng: np.random.Generator, cfg: DataConfig, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One sequence's ids (T,) and the repeated-target mask (T - 1,)."""
    n = cfg.seq_len - 1
    prefix = int(rng.integers(0, cfg.max_prefix + 1))  # so that no block starts at a fixed place
    ids = rng.integers(FIRST_CHAR_ID, len(VOCAB), size=prefix).tolist()
    rep = [False] * prefix
    while len(ids) < n:
        if rng.random() < cfg.text_share:
            stretch = text_stretch(rng, table, int(rng.integers(cfg.min_block, cfg.max_block + 1)))
            ids += stretch
            rep += [False] * len(stretch)
            continue
        length = int(rng.integers(cfg.min_block, cfg.max_block + 1))
        # all different, so that each character of the copy has one earlier occurrence to look at
        block = (FIRST_CHAR_ID + rng.choice(len(VOCAB) - FIRST_CHAR_ID, size=length, replace=False)).tolist()
        gap_len = int(rng.integers(1, cfg.max_gap + 1)) if cfg.max_gap and rng.random() < 0.5 else 0
        gap = rng.integers(FIRST_CHAR_ID, len(VOCAB), size=gap_len).tolist()
        ids += block + gap + block
        rep += [False] * (length + gap_len) + [False] + [True] * (length - 1)
    ids = np.array([VOCAB.index(BOS), *ids[:n]], dtype=np.int64)
    return ids, np.array(rep[:n], dtype=bool)


def batch(rng: np.random.Generator, size: int, cfg: DataConfig, table: np.ndarray) -> Batch:
    rows = [sequence(rng, cfg, table) for _ in range(size)]
    return Batch(np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows]))


def held_out(seed: int, size: int = 64, cfg: DataConfig = DataConfig()) -> Batch:
    """A fixed held-out set: its own random stream, never the training one."""
    return batch(np.random.default_rng([seed, 1]), size, cfg, skip_table(seed))


def training_stream(seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, 0])


def repeated_block(seed: int = 0, length: int = 30) -> str:
    """The probe text: ``length`` random characters, all different (as repeated random tokens from a
    large vocabulary are: a character seen twice in the block would leave two earlier copies to
    look at), from a-z and 0-9, twice."""
    rng = np.random.default_rng([seed, 2])
    letters = string.ascii_lowercase + string.digits
    block = "".join(letters[i] for i in rng.choice(len(letters), size=length, replace=False))
    return block + block
