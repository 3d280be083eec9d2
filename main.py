"""Attention Explorer: ``python main.py`` opens the window, ``python main.py export|explain ...`` are headless."""

import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["export"]:
        from models.cli import export_main

        return export_main(argv[1:])
    if argv[:1] == ["explain"]:
        from models.explain_cli import explain_main

        return explain_main(argv[1:])
    if argv[:1] == ["train"]:
        from models.training.train_cli import train_main

        return train_main(argv[1:])
    from explorer.app import run_app

    return run_app(argv)


def entry_point() -> int:
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(entry_point())
