"""Attention Explorer: ``python main.py`` opens the window; the commands below are headless."""

import importlib
import sys

# name: (module, function, what it does). A new command is one line here.
COMMANDS = {
    "export": ("models.cli.export", "export_main", "every stage of attention: <stage>.npy files + manifest.json"),
    "explain": ("models.cli.explain", "explain_main", "how one number of one stage is computed, with every summand"),
    "why": ("models.cli.why", "why_main", "why a head attends: a score split into query and key sources"),
    "generate": ("models.cli.generate", "generate_main", "generate with a decoder: tokens, attention and logit lens"),
    "atlas": ("models.cli.atlas", "atlas_main", "every head's metrics and detector scores over a corpus"),
    "timeline": ("models.cli.timeline", "timeline_main", "a training history: hashes, heads over steps, events"),
    "train": ("models.cli.train", "train_main", "train the tiny decoder shipped as --model induction"),
}  # fmt: skip
WINDOW = "open the window (no command; its options below)"


def commands_help() -> str:
    """The commands, a line each (the window's --help ends with it)."""
    width = max(map(len, COMMANDS)) + 2
    lines = [f"  main.py {name:<{width}}{about}" for name, (_, _, about) in COMMANDS.items()]
    lines.append(f"  main.py {'[options]':<{width}}{WINDOW}")
    return "commands ('main.py COMMAND --help' for each one's options):\n" + "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] and argv[0] in COMMANDS:
        module, function, _ = COMMANDS[argv[0]]
        try:
            return getattr(importlib.import_module(module), function)(argv[1:])
        except SystemExit as exc:  # argparse: --help (0), or its one line for a usage mistake (2)
            return exc.code if isinstance(exc.code, int) else 2
    from explorer.app import run_app

    return run_app(argv, commands_help())


def entry_point() -> int:
    return interrupted_main(sys.argv[1:])


def interrupted_main(argv: list[str]) -> int:
    """``main``, with Ctrl+C as one line (the writers have removed their temporaries by then), and
    stdout that cannot be written as one line too, or a quiet exit for a closed pipe (models/io/stdout.py)."""
    from models.io.heap import map_large_blocks
    from models.io.stdout import StdoutFailed, guarded_stdout

    map_large_blocks()  # a long stage's bands are given back to the system when freed (models/io/heap.py)
    with guarded_stdout() as stdout:
        try:
            return stdout.finish(main(argv))
        except StdoutFailed:
            return stdout.finish(2)
        except KeyboardInterrupt as exc:
            name = str(exc) or "SIGINT"
            print(f"error: interrupted by {name}; no partly written file was left", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(interrupted_main(sys.argv[1:]))
