"""Issue 32: the frame scheduler (explorer/widgets/frames.py) is the one owner of time. No other
module of the window makes a timer, a debouncer or a throttle of its own, or a second scheduler:
each wait is asked of frames.py by name (debounced, later, Ticker, run_until, a Frames phase)."""

from __future__ import annotations

import re
from pathlib import Path

from explorer.widgets.frames import Frames

EXPLORER = Path(__file__).resolve().parents[2] / "explorer"
OWNER = {"widgets/frames.py", "widgets/debounce.py"}  # the scheduler and superqt's debouncer under it
TIME = re.compile(r"\bQTimer\b|\bqdebounced\b|\bqthrottled\b|\bDebounced\(|\bQBasicTimer\b|\bstartTimer\(")


def test_no_module_but_the_scheduler_makes_a_timer():
    makers = {}
    for path in sorted(EXPLORER.rglob("*.py")):
        name = path.relative_to(EXPLORER).as_posix()
        lines = [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if TIME.search(line)]
        if lines and name not in OWNER:
            makers[name] = lines
    assert makers == {}


def test_a_scheduler_is_made_only_where_a_window_has_none():
    """``Frames(`` in the main window, and as the fallback of a view or panel shown alone."""
    made = {path.relative_to(EXPLORER).as_posix() for path in EXPLORER.rglob("*.py")
            if "Frames(self)" in path.read_text(encoding="utf-8")}  # fmt: skip
    assert made == {"window.py", "widgets/matrix_view.py", "panels/generate_panel.py"}


def test_the_generate_window_shares_the_main_window_scheduler(qtbot, make_window):
    window = make_window()
    generate = window.windows.open_generate()
    qtbot.addWidget(generate)
    assert generate.panel.frames is window.frames
    assert window.findChildren(Frames) == [window.frames]
