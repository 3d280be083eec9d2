"""The atlas of a corpus as a run that survives being killed: its blocks counted, in this process or
as Ray tasks, each finished block committed at once to a part file (models/reads/atlas_parts.py).

- ``--shard I/N``: the part file is ``--out`` itself; it says ``"complete": true`` when its last block
  (and, for part 1, the detectors) are done.
- one process (or ``--ray``): the state is a hidden file beside ``--out`` (:func:`state_path`), removed
  once the atlas is written.

Run the same command again after a kill (SIGINT, SIGKILL, a full disk): the blocks the state holds
are skipped, never counted twice; a state of another run (another model, corpus, split) is started
afresh, a user's file never replaced.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from models.errors import InputError
from models.reads.atlas_parts import PART_FORMAT, Part, in_part, read_part


def state_path(out: str | Path) -> Path:
    """Where a whole run keeps its committed blocks: ``.<out>.atlas-resume.json`` beside ``out``."""
    out = Path(out)
    return out.resolve().parent / f".{out.name}.atlas-resume.json"


def is_part_file(path: Path) -> bool:
    """Whether ``path`` is an atlas part this tool wrote (by its first bytes: a user's file is never one)."""
    try:
        with open(path, "rb") as f:
            head = f.read(200)
    except OSError:
        return False
    return f'"format":"{PART_FORMAT}"'.encode() in head


def open_state(path: Path, key: dict, part: int, model_info: dict, corpus: dict | None, force: bool,
               shard: bool) -> Part:  # fmt: skip
    """The state to go on from: the one at ``path`` when it is of this run, else a new one. A shard's
    ``--out`` that is not a part file, or a part of another run (without ``--force``), is refused."""
    from models.reads.atlas_sums import HeadSums
    from models.reads.survey import METRIC_NAMES

    fresh = Part(key, part, HeadSums(METRIC_NAMES, (model_info["num_layers"], model_info["num_heads"])),
                 model_info, corpus)  # fmt: skip
    if shard and path.is_dir():
        raise InputError(f"--out {path} is a folder; with --shard, --out is the part's file (e.g. part-{part}.json)")
    if not path.exists():
        return fresh
    if path.is_symlink() or not path.is_file() or not is_part_file(path):
        if shard:
            raise InputError(f"--out {path} exists and is not an atlas part; choose a new file")
        return fresh
    try:
        state = read_part(path)
    except InputError:
        if shard and not force:
            raise
        return fresh
    if state.part == part and _same_run(state.key, key):
        return state  # its saved torch thread count, when another, is the caller's to take (the same bits)
    if shard and not force:
        raise InputError(f"--out {path} holds part {state.part} of another run ({state.key['model']}, "
                         f"{state.key['parts']} parts); use --force to replace it")  # fmt: skip
    return fresh


def _same_run(saved: dict, key: dict) -> bool:
    """The same run, whatever the torch threads this process has: a run resumed in another process
    (the GUI's worker takes cores - 1 threads) goes on with the threads its saved blocks were counted with."""
    return {k: v for k, v in saved.items() if k != "torch_threads"} == {k: v for k, v in key.items()
                                                                        if k != "torch_threads"}  # fmt: skip


def count_blocks(model, texts, state: Part, *, limit, block: int, parts: int, ray: str | None, workers,
                 commit: Callable[[Part], None], progress: Callable[[int], None] | None,
                 spec: dict) -> Part:  # fmt: skip
    """Count the part's blocks the state has not yet counted, committing the state after each."""
    done = set(state.blocks)

    def wanted(index: int) -> bool:
        return in_part(index, state.part, parts) and index not in done

    def on_block(index: int, sums) -> None:
        state.blocks.append(index)
        state.sums = sums
        commit(state)

    start = time.perf_counter()
    if ray is not None:
        from models.reads.atlas_ray import ray_blocks

        ray_blocks(spec, texts, ray, workers, state.sums, limit=limit, block=block, wanted=wanted,
                   on_block=on_block, progress=progress, model_hash=state.key["model_sha256"])  # fmt: skip
    else:
        from models.reads.atlas import run_blocks

        run_blocks(model, texts, limit=limit, block=block, wanted=wanted, sums=state.sums, on_block=on_block,
                   progress=progress)  # fmt: skip
    state.elapsed_s += time.perf_counter() - start
    return state


def part_texts(total: int, block: int, part: int, parts: int) -> int:
    """How many of the first ``total`` texts fall in the part's blocks."""
    blocks = -(-total // block)
    return sum(min(block, total - b * block) for b in range(part - 1, blocks, parts))


def say_resumed(state: Part, path: Path) -> None:
    if state.blocks:
        texts = state.sums.counters["texts"] + state.sums.counters["skipped_texts"]
        print(f"resuming from {path}: {len(state.blocks)} block(s), {texts} texts already counted", file=sys.stderr)
