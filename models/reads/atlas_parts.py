"""An atlas in parts: the exact sums of some blocks of a corpus, written as a small JSON file, merged
exactly into the atlas of the whole.

A run's *key* says what it computes: the model (its name and a sha256 of its files), the corpus (its
sha256), ``--limit``, the block size, the number of parts, the detectors (on or off, their seed) and
the metrics' version, torch's thread count (it changes the kernels' last bits). Block ``b`` (texts
``b·B`` to ``(b+1)·B − 1`` of the corpus, in its order) belongs to part ``b mod N + 1``, so the
parts are fixed by the line numbers alone, and a block gives the same bits in any part
(models/reads/atlas.py :func:`~models.reads.atlas.block_sums`). Part 1 also holds the detectors'
scores (they read the probes, not the corpus).

A part file is rewritten atomically after each block it finishes (``"complete": false`` until its
last): the state a killed run resumes from, counting no block twice. :func:`merge_parts` refuses
parts of another model, corpus or split, a missing, repeated or unfinished part, with one line
naming it.

numpy and the standard library (the model's files read for their hash); no Qt.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.errors import InputError
from models.io import read_json
from models.io.atomic import TOOL, atomic_file
from models.reads.atlas_sums import HeadSums
from models.reads.survey import METRIC_NAMES, METRICS_VERSION

PART_FORMAT = "attention-explorer-atlas-part/1"
MAX_PART_BYTES = 256 << 20


def model_sha256(model) -> str:
    """A sha256 of the files that make the model's numbers: config.json, tokenizer.json and its
    weights (every shard), from the folder it was loaded from (a checkpoint's own folder), or the GGUF file."""
    from models.pretrained.loader import weight_files

    folder = Path(model.path)
    if folder.is_file():  # a GGUF file: its config, tokenizer and weights in one
        paths = [folder]
    else:
        paths = [folder / "config.json", folder / "tokenizer.json", *weight_files(folder)[0]]
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode() + b"\0")
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    return h.hexdigest()


def run_key(model_name: str, model_hash: str, corpus: dict | None, *, limit: int | None, block: int, parts: int,
            detectors: bool, seed: int, threads: int) -> dict:  # fmt: skip
    """What a run computes; two parts merge only when their keys are equal. ``threads``: torch's
    intra-op threads, which choose the CPU kernels' order of summation (1 and 2 threads differ in
    the last bits of a metric), so parts merge to one run's bits only from one thread count."""
    return {"model": model_name, "model_sha256": model_hash,
            "corpus_sha256": None if corpus is None else corpus["sha256"], "limit": limit, "block_texts": block,
            "parts": parts, "detectors": detectors, "seed": seed, "metrics_version": METRICS_VERSION,
            "torch_threads": threads}  # fmt: skip


def in_part(index: int, part: int, parts: int) -> bool:
    """Whether block ``index`` (from 0) belongs to part ``part`` (from 1) of ``parts``."""
    return index % parts == part - 1


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> (I, N), 1 ≤ I ≤ N."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise InputError(f"--shard takes I/N (the I-th of N parts, e.g. 2/8), got {text!r}") from None
    if not 1 <= i <= n <= 1_000_000:
        raise InputError(f"--shard I/N needs 1 <= I <= N <= 1000000, got {text!r}")
    return i, n


@dataclass
class Part:
    """A part's state: its key, number, the blocks it has counted, their sums; ``model_info`` the
    atlas manifest's model keys; ``detectors`` part 1's scores (name -> (L, h)) or None."""

    key: dict
    part: int
    sums: HeadSums
    model_info: dict
    corpus: dict | None = None
    blocks: list[int] = field(default_factory=list)
    complete: bool = False
    detectors: dict[str, np.ndarray] | None = None
    elapsed_s: float = 0.0

    def to_json(self) -> dict:
        found = None if self.detectors is None else {k: v.tolist() for k, v in self.detectors.items()}
        return {"tool": TOOL, "format": PART_FORMAT, "key": self.key, "part": self.part, "complete": self.complete,
                "blocks": sorted(self.blocks), "model_info": self.model_info, "corpus": self.corpus,
                "elapsed_s": round(self.elapsed_s, 3), "detector_scores": found, **self.sums.to_json()}  # fmt: skip


def write_part(path: str | os.PathLike, part: Part) -> None:
    """The part's state, replacing the file at once (a killed run leaves the last whole state)."""
    text = json.dumps(part.to_json(), separators=(",", ":"), allow_nan=True)  # NaN: a detector that does not apply
    with atomic_file(path, "atlas part") as f:
        f.write(text.encode("utf-8"))


def read_part(path: str | os.PathLike) -> Part:
    """A part file back, checked; an InputError (one line) if it is not one."""
    data = read_json(path, "atlas part", limit=MAX_PART_BYTES, allow_nan=True)
    if data.get("format") != PART_FORMAT:
        raise InputError(f"{path} is not an atlas part (its format is not {PART_FORMAT})")
    try:
        key, info = data["key"], data["model_info"]
        shape = (int(info["num_layers"]), int(info["num_heads"]))
        if not isinstance(key, dict) or not 1 <= int(data["part"]) <= int(key["parts"]):
            raise ValueError("its part number is not one of its parts")
        found = data["detector_scores"]
        detectors = None if found is None else {k: np.array(v, dtype=np.float64).reshape(shape)
                                                for k, v in found.items()}  # fmt: skip
        return Part(key, int(data["part"]), HeadSums.from_json(data, METRIC_NAMES, shape), info, data.get("corpus"),
                    [int(b) for b in data["blocks"]], data["complete"] is True, detectors,
                    float(data.get("elapsed_s", 0.0)))  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{path} is not an atlas part ({' '.join(str(exc).split())})") from None


def _differs(a: dict, b: dict) -> str | None:
    """How two parts' keys differ, said as a user would (None: they are of one run)."""
    if (a["model"], a["model_sha256"]) != (b["model"], b["model_sha256"]):
        return f"another model ({b['model']}, sha256 {str(b['model_sha256'])[:12]}…, not {a['model']}, " \
               f"{str(a['model_sha256'])[:12]}…)"  # fmt: skip
    if a["corpus_sha256"] != b["corpus_sha256"]:
        return f"another corpus (sha256 {str(b['corpus_sha256'])[:12]}…, not {str(a['corpus_sha256'])[:12]}…)"
    for name, words in (("parts", "parts"), ("block_texts", "texts a block"), ("limit", "--limit")):
        if a.get(name) != b.get(name):
            return f"another split ({b.get(name)} {words}, not {a.get(name)})"
    if a != b:
        changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        return f"another run ({', '.join(f'{k} {b.get(k)}, not {a.get(k)}' for k in changed)})"
    return None


def merge_parts(paths: list[str | os.PathLike]) -> Part:
    """Every part of one run, merged (exact: any order gives the same bits); InputError naming the
    first part of another model, corpus or split, a part given twice, unfinished or missing."""
    if not paths:
        raise InputError("atlas merge needs the part files of one run")
    parts = [(str(p), read_part(p)) for p in paths]
    first_path, first = parts[0]
    seen: dict[int, str] = {}
    for path, part in parts:
        why = _differs(first.key, part.key)
        if why is not None:
            raise InputError(f"part {path} is of {why} than {first_path}")
        if part.part in seen:
            raise InputError(f"part {part.part} of {part.key['parts']} is given twice ({seen[part.part]} and {path})")
        seen[part.part] = path
        if not part.complete:
            raise InputError(f"part {part.part} of {part.key['parts']} ({path}) is unfinished: run its command "
                             f"again to finish it")  # fmt: skip
    missing = [i for i in range(1, first.key["parts"] + 1) if i not in seen]
    if missing:
        shown = ", ".join(str(i) for i in missing[:5]) + (" …" if len(missing) > 5 else "")
        raise InputError(f"part{'s' if len(missing) > 1 else ''} {shown} of {first.key['parts']} "
                         f"{'are' if len(missing) > 1 else 'is'} missing")  # fmt: skip
    sums = HeadSums(METRIC_NAMES, first.sums.shape)
    blocks: list[int] = []
    for _, part in parts:
        sums.merge(part.sums)
        blocks += part.blocks
    whole = next(p for _, p in parts if p.part == 1)
    return Part(first.key, 0, sums, whole.model_info, whole.corpus, sorted(blocks), True, whole.detectors,
                sum(p.elapsed_s for _, p in parts))  # fmt: skip
