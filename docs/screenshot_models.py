"""What ``make screenshots`` needs besides the shipped models, made from nothing but this repository:

    python docs/screenshot_models.py models OUT       random T5, gpt-oss and ModernBERT folders in OUT
                                                      (the tests' own builders; needs transformers)
    python docs/screenshot_models.py scatter ATLAS OUT.png      the atlas window's scatter tab
    python docs/screenshot_models.py weighted OUT.png ARGS...   --view model on weighted norms

Each PNG is made by the app's own screenshot code, as every other image in docs/.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "models")]


def models(out: Path) -> None:
    import encdec_refs
    import test_pretrained_families_2 as families

    out.mkdir(parents=True, exist_ok=True)
    for name, build in (("t5", lambda f: encdec_refs.build(f, "t5")),
                        ("gpt-oss", lambda f: families.build(f, "gpt_oss-sinks-moe")),
                        ("modernbert", lambda f: families.build(f, "modernbert-local-global"))):  # fmt: skip
        folder = out / name
        folder.mkdir(exist_ok=True)
        build(folder)
        print(f"wrote {folder}")


def scatter(atlas: str, png: str) -> int:
    from PySide6.QtWidgets import QApplication

    from explorer.panels.atlas_window import atlas_screenshot

    _app = QApplication.instance() or QApplication([])
    return atlas_screenshot(atlas, png, scatter=True)


def weighted(png: str, argv: list[str]) -> int:
    """``--view model`` with the survey's "Show: weighted norms" chosen, as a person would."""
    import explorer.files.view_shots as view_shots
    from explorer.app import run_app

    plain = view_shots.survey_tab

    def weighted_tab(panel, view):
        panel.measure_combo.setCurrentText("weighted norms")  # computes again; the shot waits for it
        plain(panel, view)

    view_shots.survey_tab = weighted_tab
    return run_app([*argv, "--view", "model", "--screenshot", png])


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    if what == "models":
        models(Path(rest[0]))
    elif what == "scatter":
        sys.exit(scatter(rest[0], rest[1]))
    else:
        sys.exit(weighted(rest[0], rest[1:]))
