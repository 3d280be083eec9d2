"""Attention Explorer: ``python main.py`` opens the window, ``python main.py export ...`` is headless."""

import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["export"]:
        from models.cli import export_main

        return export_main(argv[1:])
    from explorer.app import run_app

    return run_app(argv)


def entry_point() -> int:
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(entry_point())
