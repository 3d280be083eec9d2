"""``main.py atlas --model M --corpus PATH --out DIR [--limit N] [--force]``: a head atlas;
``--shard I/N`` (OUT a part file), ``--ray [ADDRESS]``; ``main.py atlas merge PART... --out DIR``.

The corpus is streamed (models/reads/corpora.py); a progress bar on stderr; each finished block is
committed (models/cli/atlas_run.py), so a killed run resumes where it stopped; Ctrl+C stops cleanly
and writes no atlas; bad input is one ``error: ...`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from models.cli.atlas_run import count_blocks, open_state, part_texts, say_resumed, state_path
from models.command_fields import ATLAS_ROWS
from models.config import Cancelled, InputError
from models.fields import OneLineParser, add_arguments, check_ranges
from models.io.atomic import check_target
from models.reads.atlas import (
    compute_atlas,
    corpus_lines,
    count_lines,
    detect_all,
    fill_best_texts,
    finish_atlas,
    model_manifest,
    probe_texts,
    write_atlas,
)
from models.reads.atlas_parts import merge_parts, model_sha256, parse_shard, run_key, write_part
from models.reads.corpora import corpus_identity


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
    if argv and argv[0] == "merge":
        return merge_main(argv[1:])
    args = build_atlas_parser().parse_args(argv)
    bar = None
    state = where = None
    try:
        check_ranges(args, fields=ATLAS_ROWS)  # --limit, --seed: refused, never clamped
        shard = parse_shard(args.shard) if args.shard is not None else None
        if args.corpus is None and (shard or args.ray):
            raise InputError("--shard and --ray split a corpus: give --corpus")
        if args.workers is not None and args.ray is None:
            raise InputError("--workers counts Ray workers: give --ray too")
        if shard is None:
            check_target(args.out, args.force)  # fail before computing anything
        corpus = corpus_identity(args.corpus) if args.corpus is not None else None
        if args.ray is not None:
            from models.reads.atlas_ray import require_ray

            require_ray()
        model = load(args)
        if corpus is None:
            return probes_atlas(args, model)
        import torch

        info = {**model_manifest(model), "model_sha256": model_sha256(model)}
        part, parts = shard or (1, 1)
        key = run_key(model.name, info["model_sha256"], corpus, limit=args.limit, block=args.block, parts=parts,
                      detectors=not args.no_detectors, seed=args.seed, threads=torch.get_num_threads())  # fmt: skip
        where = Path(args.out) if shard else state_path(args.out)
        state = open_state(where, key, part, info, corpus, args.force, shard is not None)
        if state.key["torch_threads"] != key["torch_threads"]:  # resumed: counted on with the saved blocks' threads
            torch.set_num_threads(state.key["torch_threads"])
            key = state.key
        if state.complete:
            print(f"part {part} of {parts} in {where} is already complete ({state.sums.counters['texts']} texts)")
            return 0
        say_resumed(state, where)
        total = part_texts(count_lines(args.corpus, args.limit), args.block, part, parts)
        bar = ProgressBar(total, enabled=not args.quiet)
        spec = {"model": args.model, "step": args.step, "device": args.device, "threads": key["torch_threads"]}
        count_blocks(model, corpus_lines(args.corpus), state, limit=args.limit, block=args.block, parts=parts,
                     ray=args.ray, workers=args.workers, commit=lambda s: write_part(where, s), progress=bar,
                     spec=spec)  # fmt: skip
        bar.close()
        bar = None
        found = detect_all(model, args.seed, None) if part == 1 and not args.no_detectors else None
        if shard is not None:
            state.detectors, state.complete = found, True
            write_part(where, state)
            print(f"wrote part {part} of {parts} ({state.sums.counters['texts']} texts, {len(state.blocks)} "
                  f"blocks) to {where}")  # fmt: skip
            return 0
        atlas = finish_atlas(model, state.sums, found, args.seed, state.elapsed_s, model_info=info)
        fill_best_texts(atlas, args.corpus)
        out = write_atlas(atlas, args.out, force=args.force, corpus=corpus)
        where.unlink(missing_ok=True)  # the run's own state, done with
    except InputError as exc:
        if bar is not None:
            bar.close()
        print(f"error: {' '.join(str(exc).split())}{kept(state, where)}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Cancelled):
        if bar is not None:
            bar.close()
        print(f"error: interrupted by SIGINT: {kept(state, where) and 'the atlas was not written' or 'nothing written'}"
              f"{kept(state, where)}", file=sys.stderr)  # fmt: skip
        return 130
    man = atlas.manifest
    print(f"wrote the atlas of {atlas.layers} layers × {atlas.heads} heads over {atlas.texts} texts "
          f"({man['tokens']} tokens, {man['elapsed_s']:.1f} s) to {out}")  # fmt: skip
    return 0


def kept(state, where) -> str:
    """What a stopped run keeps, for its error line ("" when it committed no block)."""
    if state is None or not state.blocks or where is None or not where.exists():
        return ""
    texts = state.sums.counters["texts"] + state.sums.counters["skipped_texts"]
    return f"; the {texts} texts counted so far are kept in {where}: run the same command again to resume"


def load(args):
    from models import api
    from models.pretrained.registry import is_encoder_decoder

    if is_encoder_decoder(args.model):  # was an AttributeError traceback (issue 36)
        raise InputError(f"atlas reads encoder or decoder models; {args.model} is an encoder-decoder model "
                         f"(t5, mt5, bart, marian): survey one block with 'main.py export --all-layers --block'")
    return api.load(args.model, step=args.step, device=args.device).engine  # the front door's model


def probes_atlas(args, model) -> int:
    """The atlas of the detectors' own probes (no corpus): one process, nothing to resume."""
    texts = list(probe_texts(model, args.seed))
    bar = ProgressBar(min(len(texts), args.limit or len(texts)), enabled=not args.quiet)
    try:
        atlas = compute_atlas(model, texts, limit=args.limit, detectors=not args.no_detectors, seed=args.seed,
                              progress=bar, block=args.block)  # fmt: skip
    finally:
        bar.close()
    atlas.best_text = {i: " ".join(e.tokens) for i, e in texts}
    out = write_atlas(atlas, args.out, force=args.force)
    print(f"wrote the atlas of {atlas.layers} layers × {atlas.heads} heads over {atlas.texts} probes "
          f"({atlas.manifest['tokens']} tokens, {atlas.manifest['elapsed_s']:.1f} s) to {out}")  # fmt: skip
    return 0


def build_merge_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="main.py atlas merge", description="Join the parts written by 'main.py atlas --shard "
                      "I/N' into one atlas folder: the same heads.csv as one run, bit for bit.")  # fmt: skip
    p.add_argument("parts", nargs="+", metavar="PART", help="every part file of one run, in any order")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to create (required)")
    p.add_argument("--corpus", metavar="PATH", help="where the corpus is now, to read the texts where heads peak "
                   "(default: the path the parts name; its sha256 must be theirs)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="replace a previous atlas (never other files)")
    return p


def merge_main(argv: Sequence[str]) -> int:
    args = build_merge_parser().parse_args(argv)
    try:
        check_target(args.out, args.force)
        merged = merge_parts(args.parts)
        corpus = dict(merged.corpus or {})
        path = args.corpus or corpus.get("path")
        if not path:
            raise InputError("the parts name no corpus; give --corpus")
        now = corpus_identity(path)
        if now["sha256"] != merged.key["corpus_sha256"]:
            raise InputError(f"corpus {path} is not the one the parts counted (its sha256 has changed)")
        info = dict(merged.model_info)
        atlas = finish_atlas(None, merged.sums, merged.detectors, merged.key["seed"], merged.elapsed_s,
                             model_info=info)  # fmt: skip
        atlas.manifest["parts"] = merged.key["parts"]
        fill_best_texts(atlas, path)
        out = write_atlas(atlas, args.out, force=args.force, corpus={**corpus, "path": now["path"]})
    except InputError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted by SIGINT: nothing written", file=sys.stderr)
        return 130
    print(f"merged {merged.key['parts']} parts: the atlas of {atlas.layers} layers × {atlas.heads} heads over "
          f"{atlas.texts} texts to {out}")  # fmt: skip
    return 0
