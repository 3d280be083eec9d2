"""The head atlas window seen from outside: its screenshot (``main.py --atlas DIR --screenshot``) and
the corpus a session remembers of the atlas open beside the main window (its path and checksum)."""

from __future__ import annotations

import sys

from explorer.panels.atlas_window import AtlasWindow


def atlas_screenshot(folder, out, compare=None, colour: str | None = None, scatter: bool = False) -> int:
    """``main.py --atlas DIR [--atlas-compare DIR2] --screenshot OUT.png``: the atlas window alone."""
    from PySide6.QtWidgets import QApplication

    window = AtlasWindow(None)
    ok = window.panel.open_folder(folder) and (compare is None or window.panel.compare_folder(compare))
    if colour:
        window.panel.pane.update_form(colour=colour)
    if scatter:
        window.panel.pane.update_form(scatter=True)
    window.show()
    QApplication.processEvents()
    from explorer.files.image_export import save_screenshot

    if ok:
        code = save_screenshot(window, out)  # atomic: a failed write never touches the old PNG
    else:
        code = 2
        print(f"error: {window.panel.status.text().removeprefix('error: ')}", file=sys.stderr)
    window.close()
    window.deleteLater()
    QApplication.processEvents()
    return code


def atlas_corpus(atlas_window: AtlasWindow | None) -> dict | None:
    """``{"corpus", "sha256"}`` of the atlas open in ``atlas_window`` (a session remembers it), or None."""
    atlas = atlas_window.panel.atlas if atlas_window is not None else None
    corpus = (atlas.manifest.get("corpus") or {}) if atlas is not None else {}
    if not corpus.get("path") or not corpus.get("sha256"):
        return None
    return {"corpus": str(corpus["path"]), "sha256": str(corpus["sha256"])}


def corpus_notice(atlas: dict) -> str:
    """What reopening a session says about its atlas's corpus: the same file, changed, or gone."""
    from pathlib import Path

    from models.reads.atlas import file_sha256

    path = Path(atlas["corpus"])
    if not path.is_file():
        return f"the session's atlas corpus {path} is not there any more"
    same = file_sha256(path) == atlas["sha256"]
    return f"the session's atlas corpus {path} " + ("is unchanged (sha256 matches)" if same else
                                                      "has changed since (sha256 differs): rerun the atlas")
