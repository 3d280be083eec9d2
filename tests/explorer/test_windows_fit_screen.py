"""Every top-level window opens on the screen (issue 18): at most 1400 × 900, within the screen's
free area, and with a minimum size that fits a 1280 × 720 laptop (a layout minimum larger than the
screen makes the window grow past it whatever size it asks for)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.panels.generate_panel import GenerateWindow
from explorer.widgets.window_size import LARGEST, fitted_size

CHILD = Path(__file__).resolve().parent / "windows_child.py"
KINDS = {"main", "compare", "pe-lens", "model", "generate", "atlas", "encdec-model", "timeline"}


def test_a_size_is_capped_at_the_largest_and_at_the_screen():
    assert fitted_size(1500, 950, (1920, 1080)) == LARGEST == (1400, 900)
    assert fitted_size(1300, 1250, (1920, 1080)) == (1300, 900)
    assert fitted_size(1300, 800, (1280, 680)) == (1280, 680)
    assert fitted_size(900, 700, (1920, 1080)) == (900, 700)


def test_the_generate_window_opens_within_1400_by_900(qtbot):
    window = GenerateWindow(lambda name: None, "induction")  # nothing is loaded before Generate is pressed
    qtbot.addWidget(window)
    window.show()
    assert window.width() <= LARGEST[0] and window.height() <= LARGEST[1]


@pytest.mark.parametrize("screen", [(1280, 720), (1920, 1080)])
def test_every_window_fits_the_screen(tmp_path, screen):
    pytest.importorskip("transformers")
    config = tmp_path / "screen.json"
    width, height = screen
    config.write_text(json.dumps({"screens": [{"name": "s", "x": 0, "y": 0, "width": width, "height": height,
                                               "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))  # fmt: skip
    env = {**os.environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}", "OMP_NUM_THREADS": "1",
           "ATTENTION_EXPLORER_SETTINGS": str(tmp_path / "settings.ini")}  # fmt: skip
    done = subprocess.run([sys.executable, str(CHILD)], env=env, capture_output=True, text=True, timeout=400)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines and done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(lines[-1])
    assert report["screen"] == [width, height]
    assert set(report["windows"]) == KINDS
    too_big = {}
    for name, (w, h, min_w, min_h) in report["windows"].items():
        limit = (min(width, LARGEST[0]), min(height, LARGEST[1]))
        if w > limit[0] or h > limit[1] or min_w > 1280 or min_h > 720:
            too_big[name] = (w, h, min_w, min_h)
    assert not too_big, f"windows past the screen {screen} (size, minimum size hint): {too_big}"
