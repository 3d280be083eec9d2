"""``python main.py train [--out DIR] [--steps N] [--seed S]``: train the induction model.

A progress line on stderr, the run folder written atomically (nothing appears at ``--out`` unless
the run finishes), and one ``error: ...`` line with exit status 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from models.command_fields import TRAIN_ROWS
from models.config import InputError
from models.fields import OneLineParser, add_arguments, check_ranges
from models.io.atomic import atomic_folder, check_target
from models.memory import check_memory


def build_parser() -> argparse.ArgumentParser:
    """Every option is a row (models/command_fields.py: ``TRAIN_ROWS``), read by the one converter."""
    p = OneLineParser(prog="main.py train", description="Train the tiny decoder shipped as --model induction.")
    return add_arguments(p, TRAIN_ROWS)


def progress_line(start: float):
    """The progress bar on stderr; ``report.end()`` ends its line (nothing when none was drawn), so
    that a line after it (an error, a signal's) starts a line of its own."""
    drawn = []

    def end() -> None:
        if drawn:
            print(file=sys.stderr, flush=True)
            drawn.clear()

    def report(step: int, total: int, loss: float) -> None:
        if step % 10 and step != total:
            return
        drawn.append(True)
        elapsed = time.perf_counter() - start
        eta = elapsed / max(step, 1) * (total - step)
        width = 24
        done = int(width * step / max(total, 1))
        print(f"\rtraining [{'#' * done}{'.' * (width - done)}] step {step}/{total}  loss {loss:.3f}  "
              f"{elapsed:.0f} s, ~{eta:.0f} s left ", end="", file=sys.stderr, flush=True)  # fmt: skip

    report.end = end
    return report


def train_main(argv: Sequence[str]) -> int:
    from models.cli.export import USER_ERRORS, refused
    from models.training.train import TRAIN_BYTES, TrainConfig, train

    args = build_parser().parse_args(argv)
    try:
        check_ranges(args, fields=TRAIN_ROWS)
        out = Path(args.out)
        if out.is_dir() and not out.is_symlink() and any(out.iterdir()):  # train has no --force: never "use --force"
            raise InputError(f"output folder {out} exists and is not empty; train never replaces a folder: "
                             f"choose a new one (or remove it yourself)")  # fmt: skip
        check_target(args.out)
        check_memory(TRAIN_BYTES, "training the induction model", hint="free some memory or raise the limit")
        tc = replace(TrainConfig(), steps=args.steps, seed=args.seed)
        start = time.perf_counter()
        progress = progress_line(start)
        with atomic_folder(args.out) as tmp:
            try:
                rows = train(tmp, tc, progress)
            finally:
                progress.end()  # before the folder is published, or a line says why not
    except USER_ERRORS as exc:  # a bad input; not enough memory (issue 36: a traceback under a memory cap)
        if (code := refused(exc)) is None:
            raise
        return code
    except KeyboardInterrupt:
        print("error: interrupted by SIGINT: nothing written", file=sys.stderr)
        return 130
    last = rows[-1]
    print(f"wrote {args.out}: {len(rows)} checkpoints, final loss {last['heldout_loss']:.3f} "
          f"(repeated blocks {last['heldout_repeated_loss']:.3f}) in {time.perf_counter() - start:.0f} s")  # fmt: skip
    return 0
