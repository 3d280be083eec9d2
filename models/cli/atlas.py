"""``main.py atlas --model M --corpus FILE.txt --out DIR [--limit N] [--force]``: a head atlas.

One text per line (blank lines skipped), streamed; a progress bar on stderr; Ctrl+C stops cleanly
and writes nothing; bad input is one ``error: ...`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from models.command_fields import ATLAS_ROWS
from models.config import Cancelled, InputError
from models.fields import OneLineParser, add_arguments, check_ranges
from models.io.atomic import check_target


def build_atlas_parser() -> argparse.ArgumentParser:
    """Every option is a row (models/command_fields.py: ``ATLAS_ROWS``; the model's from the one table:
    ``--model``, ``--step``, ``--device``), read by the one converter."""
    p = OneLineParser(prog="main.py atlas", description="Every head's metrics over a corpus (mean and sd over "
                      "the texts) and its detector scores: heads.csv, top_texts.csv, manifest.json.")  # fmt: skip
    return add_arguments(p, ATLAS_ROWS, required=("model", "out"))


class ProgressBar:
    """``atlas  [#####-----]  340/1000 texts  12.3 s`` on stderr, at most ten times a second."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total, self.enabled, self.drawn = max(1, total), enabled, False
        self.start = self.last = time.perf_counter()

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < 0.1 and done < self.total):
            return
        self.last, self.drawn = now, True
        filled = int(30 * min(done, self.total) / self.total)
        sys.stderr.write(f"\ratlas  [{'#' * filled}{'-' * (30 - filled)}]  {done}/{self.total} texts  "
                         f"{now - self.start:.1f} s")  # fmt: skip
        sys.stderr.flush()

    def close(self) -> None:
        if self.drawn:  # ends the bar's line; nothing when no bar was drawn (no blank line before an error)
            sys.stderr.write("\n")
            self.drawn = False


def atlas_main(argv: Sequence[str]) -> int:
    from models.reads.atlas import (
        compute_atlas,
        corpus_lines,
        count_lines,
        file_sha256,
        fill_best_texts,
        probe_texts,
        write_atlas,
    )

    args = build_atlas_parser().parse_args(argv)
    bar = None
    try:
        check_ranges(args, fields=ATLAS_ROWS)  # --limit, --seed: refused, never clamped
        check_target(args.out, args.force)  # fail before computing anything
        corpus = None
        if args.corpus is not None:
            path = Path(args.corpus)
            if not path.is_file():
                raise InputError(f"corpus {path} is not a file")
            corpus = {"path": str(path.resolve()), "sha256": file_sha256(path), "bytes": path.stat().st_size}
        from models import api
        from models.pretrained.registry import is_encoder_decoder

        if is_encoder_decoder(args.model):  # was an AttributeError traceback (issue 36)
            raise InputError(f"atlas reads encoder or decoder models; {args.model} is an encoder-decoder model "
                             f"(t5, mt5, bart, marian): survey one block with 'main.py export --all-layers --block'")
        model = api.load(args.model, step=args.step, device=args.device).engine  # the front door's model
        if args.corpus is not None:
            total = count_lines(args.corpus, args.limit)
            texts = corpus_lines(args.corpus)
        else:
            texts = list(probe_texts(model, args.seed))
            total = min(len(texts), args.limit or len(texts))
        bar = ProgressBar(total, enabled=not args.quiet)
        atlas = compute_atlas(model, texts, limit=args.limit, detectors=not args.no_detectors, seed=args.seed,
                              progress=bar)  # fmt: skip
        bar.close()
        bar = None
        if args.corpus is not None:
            fill_best_texts(atlas, args.corpus)
        else:
            atlas.best_text = {i: " ".join(e.tokens) for i, e in texts}
        out = write_atlas(atlas, args.out, force=args.force, corpus=corpus)
    except InputError as exc:
        if bar is not None:
            bar.close()
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Cancelled):
        if bar is not None:
            bar.close()
        print("error: interrupted by SIGINT: nothing written", file=sys.stderr)
        return 130
    man = atlas.manifest
    print(f"wrote the atlas of {atlas.layers} layers × {atlas.heads} heads over {atlas.texts} texts "
          f"({man['tokens']} tokens, {man['elapsed_s']:.1f} s) to {out}")  # fmt: skip
    return 0
