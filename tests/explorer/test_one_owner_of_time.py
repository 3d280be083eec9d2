"""Issue 32: the frame scheduler (explorer/widgets/frames.py) is the one owner of time. No other
module of the window makes a timer, a debouncer or a throttle of its own, or a second scheduler, or
reads a clock to decide when (the worker's progress clock, a long overview's stream clock, the zoom's
patience): each wait is asked of frames.py by name (debounced, throttled, later, Ticker, run_until,
wait_until, a Frames phase). A clock read only to measure (a paint's milliseconds) is allowed where
it measures."""

from __future__ import annotations

import re
from pathlib import Path

from explorer.widgets.frames import Frames

EXPLORER = Path(__file__).resolve().parents[2] / "explorer"
OWNER = {"widgets/frames.py", "widgets/debounce.py"}  # the scheduler and superqt's debouncer under it
TIME = re.compile(r"\bQTimer\b|\bqdebounced\b|\bqthrottled\b|\bDebounced\(|\bQBasicTimer\b|\bstartTimer\(")
# A clock read to decide when: a throttle's "how long since", a deadline, a sleep in a loop.
CLOCK = re.compile(r"\btime\.(monotonic|time|sleep)\b|\bQElapsedTimer\b|\bQDeadlineTimer\b|\bthreading\.Timer\b")
# The clock reads that measure, each assigned to a figure (never compared with a limit), and what they measure.
MEASURES = {"window.py": "the GUI's share of a result (last_gui_ms) and the summary's request-to-result time",
            "widgets/matrix_view.py": "a paint's milliseconds (last_paint_ms)",
            "engine/worker.py": "the worker's milliseconds for a run (worker_ms)",
            "engine/long_render.py": "what a long overview's picture cost (the GUI's next ask reads it)"}  # fmt: skip
MEASURE = re.compile(r"^\s*(self\.)?\w+(\s*=|\.\w+\s*=)[^<>]*perf_counter\(\)[^<>]*$")


def _lines(pattern: re.Pattern) -> dict[str, list[int]]:
    found = {}
    for path in sorted(EXPLORER.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        hits = [n for n, line in enumerate(lines, 1) if pattern.search(line)]
        if hits:
            found[path.relative_to(EXPLORER).as_posix()] = hits
    return found


def test_no_module_but_the_scheduler_reads_a_clock_to_decide_when():
    assert {name: lines for name, lines in _lines(CLOCK).items() if name != "widgets/frames.py"} == {}


def test_a_clock_read_elsewhere_only_measures():
    """``perf_counter`` only in the modules that measure, each read assigned to a figure, never compared."""
    reads = {name: lines for name, lines in _lines(re.compile(r"perf_counter")).items() if name not in OWNER}
    assert set(reads) <= set(MEASURES)
    for name, numbers in reads.items():
        lines = (EXPLORER / name).read_text(encoding="utf-8").splitlines()
        assert [lines[n - 1] for n in numbers if not MEASURE.match(lines[n - 1])] == [], name


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
