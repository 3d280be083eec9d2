"""One way to write an image (issue 36, item 1): every screenshot, of every ``--view`` and of every
window beside the main one, is rendered into memory and written atomically (``save_screenshot``).
Before, ``--view compare|model|metrics|rollout|pe-lens``, ``--timeline``, ``--generate`` and
``--atlas`` wrote straight into the target (``grab().save``).

What a failed write does (one line, exit 2, the user's old PNG byte for byte) is checked for every
screenshot under a real full disk, a file-size limit, SIGTERM inside the write, a memory cap, FIFOs
and overflowing weights in tests/explorer/test_screenshot_hostile.py; here, the lists it runs and
the code's one writer."""

from __future__ import annotations

import ast
from pathlib import Path

from screenshot_outputs import SCREENSHOT_OUTPUTS, WINDOWS

from explorer.app import build_parser
from explorer.files.view_shots import VIEWS

ROOT = Path(__file__).resolve().parents[2]


def test_the_screenshots_tried_are_every_view_and_every_window_saved_alone():
    """The list the hostile cases run is the parser's: every window option whose screenshot is that
    window alone, and every view --view offers (the code's own list)."""
    assert "--view" in build_parser().format_help() and all(v in build_parser().format_help() for v in VIEWS)
    dests = set(vars(build_parser().parse_args([])))  # every option's name
    assert set(WINDOWS) <= dests
    assert set(SCREENSHOT_OUTPUTS) == {"screenshot", *(f"view {v}" for v in VIEWS), *(f"window {w}" for w in WINDOWS)}


def test_no_image_is_saved_anywhere_but_through_the_one_writer():
    """No ``grab().save(...)`` / ``QImage.save(path)`` outside explorer/files/image_export.py: every
    image reaches the disk through ``write_bytes`` (models.io.atomic)."""
    offenders = []
    for path in (ROOT / "explorer").rglob("*.py"):
        if path.name == "image_export.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "save":
                owner = ast.unparse(node.func.value)
                if "grab" in owner or "image" in owner.lower() or "pixmap" in owner.lower():
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
