"""GUI benchmark: how fast a request reaches the screen, and how little the GUI thread waits.

    QT_QPA_PLATFORM=offscreen python bench/bench_gui.py [--sizes 64 512 2048] [--runs 5]

For n tokens (h = 8, d_model = 512), showing the softmax weights of all eight heads in a grid:
  latency     submitting the request -> the matrix view has painted its result (median of runs)
  gui         GUI-thread time handling one result: setting images, ticks, labels (median)
  paint       the matrix view's paint of that result (median)
  stall       the longest gap seen by a 2 ms QTimer probe from the change until the window has
              settled: its result painted and the panels' answers for it shown (max)
  turn cpu    the GUI thread's CPU time in its longest turn (max): the stall without the time
              spent waiting for a core, which on a shared 2-core machine scatters from run to run
Targets on 2 cores: latency <= 50 ms / 250 ms / 2 s for n = 64 / 512 / 2048; gui + paint <= 16 ms;
stall <= 50 ms.
Each window first makes --warmups changes (default 1) and is then left to settle (its held panel
answers shown) before the timed changes.

Then for each pretrained model (--models, default minilm when installed; all twelve heads of its
'weights' shown for the default 16-token sentence), the same figures for
  first load  choosing the model in a fresh window -> its weights painted (load + first trace),
              with the model list opened for 0.3 s before, as a mouse user does (the view builds
              its heatmaps meanwhile)
  cold load   the same, chosen with the keyboard on the closed list (nothing prepared)
  layer       changing the layer -> painted (the model is cached; median of runs)
  sentence    editing the sentence -> painted (median of runs)
  back        toy -> the model again -> painted (cached, no reload)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from explorer.app import freeze_startup_objects, quiet_offscreen_warnings  # noqa: E402
from explorer.files.persistence import open_settings  # noqa: E402
from explorer.state import Inputs  # noqa: E402
from explorer.window import MainWindow  # noqa: E402

HEADS, D_MODEL = 8, 512
TIMEOUT_MS = 60_000


class StallProbe:
    """A 2 ms timer; the longest gap between two ticks is how long the event loop was blocked.

    ``longest_ms`` is wall time: on a shared machine it also counts the time the GUI thread
    waited for a core. ``longest_cpu_ms`` is the GUI thread's own CPU time in its longest
    turn (the gap with the most of it): what the window itself costs, whatever the neighbours do."""

    def __init__(self):
        self.timer = QTimer()
        self.timer.setInterval(2)
        self.timer.timeout.connect(self._tick)
        self.longest_ms = self.longest_cpu_ms = 0.0
        self._last = self._last_cpu = 0.0

    def start(self) -> None:
        self.longest_ms = self.longest_cpu_ms = 0.0
        self._last, self._last_cpu = time.perf_counter(), time.thread_time()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()
        self._tick()

    def _tick(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        self.longest_ms = max(self.longest_ms, (now - self._last) * 1000.0)
        self.longest_cpu_ms = max(self.longest_cpu_ms, (cpu - self._last_cpu) * 1000.0)
        self._last, self._last_cpu = now, cpu


def one_update(window: MainWindow, seed: int, probe: StallProbe) -> tuple[float, float, float, float]:
    """Change the seed (a full recomputation), return (latency, gui, paint, stall, turn cpu) in ms."""
    return timed_change(window, lambda: window.state.update_inputs(seed=seed), probe)


def timed_change(window: MainWindow, change, probe: StallProbe) -> tuple[float, float, float, float]:
    """Make ``change()`` to the inputs, return (latency to painted, gui, paint, stall, turn cpu) in ms."""
    view = window.matrix_view
    loop = QEventLoop()
    done: dict[str, float] = {}

    def painted(generation: int) -> None:
        if generation == window.worker.latest_generation and "at" not in done:
            done["at"] = time.perf_counter()
            loop.quit()

    view.painted.connect(painted)
    QTimer.singleShot(TIMEOUT_MS, loop.quit)
    probe.start()
    t0 = time.perf_counter()
    change()
    window.submit_now()
    loop.exec()
    if "at" in done:  # then until the window has settled, the probe still running: the result's panel
        settle(window, after_ms=20)  # answers (held while its heatmaps painted) and their paint count too
    probe.stop()
    view.painted.disconnect(painted)
    if "at" not in done:
        raise RuntimeError(f"no result painted within {TIMEOUT_MS} ms")
    return ((done["at"] - t0) * 1000.0, window.last_gui_ms, view.canvas.last_paint_ms, probe.longest_ms,
            probe.longest_cpu_ms)  # fmt: skip


def bench(n: int, runs: int, warmups: int = 1) -> dict[str, float]:
    settings = open_settings(Path(tempfile.mkdtemp()) / "bench.ini")
    sentence = " ".join(f"w{i}" for i in range(n))
    window = MainWindow(settings, Inputs(sentence=sentence, heads=HEADS, d_model=D_MODEL), persist=False,
                        stage="weights")  # fmt: skip
    window.resize(1400, 900)
    window.show()
    freeze_startup_objects()  # as main.py does once the window is up
    probe = StallProbe()
    try:
        for w in range(warmups):  # warm-up: first layout, caches, torch kernels (the first change after
            one_update(window, seed=1000 + w, probe=probe)  # the first result costs more: --warmups 2)
        settle(window)
        samples = [one_update(window, seed=s, probe=probe) for s in range(runs)]
    finally:
        window.close()
        window.deleteLater()
    latency, gui, paint, stall, cpu = zip(*samples)
    return {
        "latency": statistics.median(latency), "gui": statistics.median(gui),
        "paint": statistics.median(paint), "stall": max(stall), "cpu": max(cpu),
    }  # fmt: skip


def settle(window: MainWindow, timeout_ms: int = 10_000, after_ms: int = 50) -> None:
    """Let the window finish what the warm-up started (a panel's answer held while the heatmaps
    painted, shown once they have): the first timed change then measures itself, not the warm-up's
    leftovers, which a person never meets within a millisecond of the first result."""
    deadline = time.perf_counter() + timeout_ms / 1000.0
    while not window.is_settled() and time.perf_counter() < deadline:
        wait(5)
    wait(after_ms)


def wait(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def typical(samples: list[tuple[float, ...]]) -> tuple[float, ...]:
    """Medians of latency, gui and paint; the worst stall and turn of all samples."""
    columns = list(zip(*samples))
    return (*(statistics.median(c) for c in columns[:3]), *(max(c) for c in columns[3:]))


def bench_model(model: str, runs: int, cold: bool = False) -> dict[str, tuple[float, ...]]:
    """{what: (latency, gui, paint, stall, turn cpu)} for a pretrained model, see the module docstring.
    ``cold``: only the first load, without opening the model list first."""
    settings = open_settings(Path(tempfile.mkdtemp()) / "bench.ini")
    window = MainWindow(settings, Inputs(), persist=False, stage="weights")
    window.resize(1400, 900)
    window.show()
    freeze_startup_objects()  # as main.py does once the window is up
    probe = StallProbe()
    update = window.state.update_inputs
    results: dict[str, tuple[float, ...]] = {}
    try:
        timed_change(window, lambda: update(seed=1), probe)  # the toy first: a window that has painted
        settle(window)
        if cold:
            return {"cold load": timed_change(window, lambda: update(model=model), probe)}
        window.model_chooser.combo.showPopup()
        wait(300)
        window.model_chooser.combo.hidePopup()
        results["first load"] = timed_change(window, lambda: update(model=model), probe)
        if window.last_error:
            raise RuntimeError(window.last_error)
        layers = window.state.model_info.num_layers
        samples = [timed_change(window, lambda i=i: update(layer=(i + 1) % layers), probe) for i in range(runs)]
        results["layer"] = typical(samples)
        samples = [timed_change(window, lambda i=i: update(sentence=f"The cat sat on mat number {i}."), probe)
                   for i in range(runs)]  # fmt: skip
        results["sentence"] = typical(samples)
        timed_change(window, lambda: update(model=""), probe)
        results["back"] = timed_change(window, lambda: update(model=model), probe)
    finally:
        window.close()
        window.deleteLater()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 512, 2048])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmups", type=int, default=1, help="toy changes before the timed ones (default 1)")
    parser.add_argument("--models", nargs="*", default=["minilm"], help="pretrained models to time (none: skip)")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    quiet_offscreen_warnings()
    print(f"GUI benchmark: h={HEADS}, d_model={D_MODEL}, all heads of 'weights' shown, {os.cpu_count()} cores")
    print(f"{'n':>6} {'latency ms':>11} {'gui ms':>8} {'paint ms':>9} {'stall ms':>9} {'turn cpu ms':>12}")
    for n in args.sizes:
        runs = args.runs if n < 2048 else max(3, args.runs // 2)
        r = bench(n, runs, args.warmups)
        figures = f"{r['latency']:>11.1f} {r['gui']:>8.1f} {r['paint']:>9.1f} {r['stall']:>9.1f} {r['cpu']:>12.1f}"
        print(f"{n:>6} {figures}", flush=True)
    for model in args.models:
        print(f"\nPretrained {model}: all heads of 'weights' shown, default sentence")
        print(f"{'change':>11} {'latency ms':>11} {'gui ms':>8} {'paint ms':>9} {'stall ms':>9} {'turn cpu ms':>12}")
        rows = {**bench_model(model, args.runs), **bench_model(model, args.runs, cold=True)}
        for what, (latency, gui, paint, stall, cpu) in rows.items():
            print(f"{what:>11} {latency:>11.1f} {gui:>8.1f} {paint:>9.1f} {stall:>9.1f} {cpu:>12.1f}", flush=True)
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
