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
from typing import NoReturn

from .atomic import check_target
from .checks import check_seed
from .config import Cancelled, InputError
from .detectors import PROBE_SEED


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


def build_atlas_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="main.py atlas", description="Every head's metrics over a corpus (mean and sd over the "
                "texts) and its detector scores: heads.csv, top_texts.csv, manifest.json.")  # fmt: skip
    p.add_argument("--model", required=True, metavar="PATH_OR_NAME", help="a pretrained model (e.g. minilm)")
    p.add_argument("--corpus", metavar="FILE.txt", help="one text per line; without it, the detectors' probes")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to create")
    p.add_argument("--limit", type=int, metavar="N", help="read at most N texts")
    p.add_argument("--force", action="store_true", help="replace a previous atlas (never other files)")
    p.add_argument("--seed", type=int, default=PROBE_SEED, help="the detectors' probes (default 0)")
    p.add_argument("--no-detectors", action="store_true", help="leave the detector columns empty (NaN)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


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
    from .atlas import compute_atlas, corpus_lines, count_lines, file_sha256, fill_best_texts, probe_texts, write_atlas

    args = build_atlas_parser().parse_args(argv)
    bar = None
    try:
        if args.limit is not None and args.limit < 1:
            raise InputError(f"--limit must be at least 1, got {args.limit}")
        check_seed(args.seed)  # a negative seed was a ValueError traceback from numpy (issue 36)
        check_target(args.out, args.force)  # fail before computing anything
        corpus = None
        if args.corpus is not None:
            path = Path(args.corpus)
            if not path.is_file():
                raise InputError(f"corpus {path} is not a file")
            corpus = {"path": str(path.resolve()), "sha256": file_sha256(path), "bytes": path.stat().st_size}
        from .pretrained import load_model
        from .pretrained.registry import is_encoder_decoder

        if is_encoder_decoder(args.model):  # was an AttributeError traceback (issue 36)
            raise InputError(f"atlas reads encoder or decoder models; {args.model} is an encoder-decoder model "
                             f"(t5, mt5, bart, marian): survey one block with 'main.py export --all-layers --block'")
        model = load_model(args.model, device=args.device)
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
