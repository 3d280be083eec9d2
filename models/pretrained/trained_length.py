"""How long the sequences a trained model saw were, from its own ``training.json``, and the notice
for an input longer than that.

The induction model accepts 256 positions (its config's ``max_position_embeddings``) but was trained
on 64-token sequences; past ~110 tokens its previous-token head falls apart. A checkpoint's folder
(``run/checkpoints/step-N``) reads the run's ``training.json``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from models.config import InputError
from models.io.files import is_regular
from models.io.jsonfile import read_json


@functools.lru_cache(maxsize=32)
def trained_length(folder: str | os.PathLike) -> int | None:
    """The training sequences' length (``config.data.seq_len``), or None when the model says none."""
    folder = Path(folder)
    for place in (folder, folder.parent.parent):  # the run's own folder, or a checkpoint's run
        path = place / "training.json"
        if not is_regular(path):
            continue
        try:
            info = read_json(path, "training.json")
        except InputError:
            return None
        length = ((info.get("config") or {}).get("data") or {}).get("seq_len")
        return length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None
    return None


def length_notice(folder: str | os.PathLike, n_tokens: int) -> str:
    """A line when ``n_tokens`` is more than the model was trained on, else ""."""
    length = trained_length(folder)
    if length is None or n_tokens <= length:
        return ""
    return (f"{n_tokens} tokens: longer than the {length}-token sequences this model was trained on (its "
            f"training.json); past them its heads may not do what they learned")
