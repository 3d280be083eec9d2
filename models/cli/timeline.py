"""``main.py timeline --model M [--corpus FILE] --out DIR``: a model's training history as a table.

First every checkpoint's content hash: steps that hold the same weights are named on stderr before
anything else runs ("step 0 and step 143000 hold the same weights: this history is broken"). Then at
every step the detectors' probes (and the corpus, when given), each head matched to the previous
step's; ``steps.csv``, ``events.csv`` and ``manifest.json`` (models/history/table.py) go to ``--out``,
all at once. Bad input is one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from models.config import Cancelled, InputError
from models.fields import OneLineParser
from models.io.atomic import check_target
from models.limits import CHOICES


def build_timeline_parser() -> OneLineParser:
    p = OneLineParser(prog="main.py timeline",
                      description="A model's training history: each checkpoint's content hash and loss, every "
                                  "head's detector scores (and metrics over a corpus) and its match to the "
                                  "previous step; the steps where a head takes a role.")  # fmt: skip
    p.add_argument("--model", required=True, help="a model with checkpoints (induction, a run folder, a Trainer's "
                   "output_dir, a cached model with stepN revisions)")  # fmt: skip
    p.add_argument("--corpus", metavar="FILE.txt", help="one text per line: every head's metrics over it, per step")
    p.add_argument("--limit", type=int, metavar="N", help="read at most N texts of the corpus")
    p.add_argument("--steps", default="all", help="'all' (default) or a comma list: first,583,last")
    p.add_argument("--device", default="cpu", choices=CHOICES["device"])
    p.add_argument("--out", required=True, metavar="DIR", help="folder to create (steps.csv, events.csv)")
    p.add_argument("--force", action="store_true", help="replace a previous timeline (never other files)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def timeline_main(argv: Sequence[str]) -> int:
    from models.history.table import build_history, write_history
    from models.history.why_steps import chosen_steps, history_of

    args = build_timeline_parser().parse_args(argv)

    def progress(what: str, done: int, total: int) -> None:
        if not args.quiet:
            sys.stderr.write(f"\rtimeline  {what}  {done}/{total}" + ("\n" if done == total else ""))
            sys.stderr.flush()

    def warn(integrity) -> None:
        for line in integrity.message().splitlines():
            print(f"warning: {line}", file=sys.stderr)

    try:
        if args.limit is not None and args.limit < 1:
            raise InputError(f"--limit must be at least 1, got {args.limit}")
        check_target(args.out, args.force)
        if args.corpus is not None and not Path(args.corpus).is_file():
            raise InputError(f"corpus {args.corpus} is not a file")
        root, available = history_of(args.model)
        chosen = chosen_steps(args.steps, list(available), root)
        history = build_history(Path(root), {s: available[s] for s in chosen}, args.corpus, args.limit,
                                device=args.device, progress=progress, on_integrity=warn)  # fmt: skip
        out = write_history(history, args.out, force=args.force, source={"model": args.model,
                            "corpus": args.corpus, "limit": args.limit})  # fmt: skip
    except InputError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Cancelled):
        print("error: interrupted by SIGINT: nothing written", file=sys.stderr)
        return 130
    for event in history.events:
        print(event.text())
    print(f"wrote {len(history.steps)} steps × {history.detectors['previous'].shape[1]} layers × "
          f"{history.detectors['previous'].shape[2]} heads and {len(history.events)} events to {out}")  # fmt: skip
    return 0
