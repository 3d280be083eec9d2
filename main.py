"""Attention Explorer: ``python main.py`` opens the window; export, explain and generate are headless."""

import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["export"]:
        from models.cli import export_main

        return export_main(argv[1:])
    if argv[:1] == ["explain"]:
        from models.explain_cli import explain_main

        return explain_main(argv[1:])
    if argv[:1] == ["why"]:
        from models.why_cli import why_main

        return why_main(argv[1:])
    if argv[:1] == ["generate"]:
        from models.generate.cli import generate_main

        return generate_main(argv[1:])
    if argv[:1] == ["atlas"]:
        from models.atlas_cli import atlas_main

        return atlas_main(argv[1:])
    if argv[:1] == ["train"]:
        from models.training.train_cli import train_main

        return train_main(argv[1:])
    from explorer.app import run_app

    return run_app(argv)


def entry_point() -> int:
    return interrupted_main(sys.argv[1:])


def interrupted_main(argv: list[str]) -> int:
    """``main``, with Ctrl+C as one line (the writers have removed their temporaries by then)."""
    try:
        return main(argv)
    except KeyboardInterrupt as exc:
        name = str(exc) or "SIGINT"
        print(f"error: interrupted by {name}; no partly written file was left", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(interrupted_main(sys.argv[1:]))
