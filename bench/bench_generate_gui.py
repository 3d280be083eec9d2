"""Benchmark the Generate window: a step of the slider until the window is painted.

    QT_QPA_PLATFORM=offscreen python bench/bench_generate_gui.py [--prompt 64] [--tokens 64] [--runs 1]

Generates with the MiniLM-sized random decoder of bench_generate.py (6 layers × 6 heads), then moves
the step slider across every step (last to first) and, for each move, measures
  update   the move -> its frame shown (``GeneratePanel.shown``) and every view of the panel
           repainted by Qt (``--full-repaint``: the whole window repainted at once)
  stall    the longest gap a 2 ms timer on the GUI thread saw meanwhile (bench_gui.StallProbe): how
           long the window could not answer input; on a shared machine it counts waiting for a core
  own      the longest stall less the time the GUI thread waited, runnable, for a core (Linux's
           /proc/thread-self/schedstat): what the window costs whatever other processes do
  turn cpu the GUI thread's own CPU time in its longest turn
Targets (issue 21): update <= 100 ms, stall <= 50 ms. The figures printed are the median update
and the worst stall and turn of all moves. The window is shown and its start-up objects frozen out
of garbage collections as ``main.py --generate`` does; the generation's own first paint is let
settle before the moves (it is not a step of the slider).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

UPDATE_TARGET_MS, STALL_TARGET_MS = 100.0, 50.0
TIMEOUT_MS = 10_000


def settle(app, panel) -> None:
    """Let every posted event, frame and paint run."""
    wait = getattr(panel, "wait_until_shown", None)  # (not in the first version of the panel)
    for _ in range(5):
        if wait is not None:
            wait()
        app.processEvents()
        time.sleep(0.01)


def run_queue_ms() -> float:
    """How long this thread has waited, runnable, for a core (Linux: /proc/thread-self/schedstat), ms."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return 0.0


def own_stall_probe():
    """bench_gui.StallProbe that also keeps ``longest_own_ms``: the longest gap less the time the
    GUI thread waited for a core in it (the load of other processes), on Linux."""
    from bench_gui import StallProbe

    class OwnStallProbe(StallProbe):
        def start(self) -> None:
            self.longest_own_ms, self._queued = 0.0, run_queue_ms()
            super().start()

        def _tick(self) -> None:
            now, queued = time.perf_counter(), run_queue_ms()
            own = (now - self._last) * 1000.0 - (queued - self._queued)
            self.longest_own_ms, self._queued = max(self.longest_own_ms, own), queued
            super()._tick()

    return OwnStallProbe()


class PaintCounter:
    """Counts the paints of each pyqtgraph view of the panel (an event filter on their viewports)."""

    def __init__(self, panel):
        from PySide6.QtCore import QEvent, QObject

        views = [panel.model_view.canvas, panel.matrix.canvas, panel.bars.plot, panel.lens.plot]
        self.counts = [0] * len(views)
        counts = self.counts

        class Filter(QObject):
            def __init__(self, i):
                super().__init__()
                self.i = i

            def eventFilter(self, obj, event):  # noqa: N802 - Qt API
                if event.type() == QEvent.Type.Paint:
                    counts[self.i] += 1
                return False

        self.filters = [Filter(i) for i in range(len(views))]
        for view, f in zip(views, self.filters):
            view.viewport().installEventFilter(f)


def move(app, window, step: int, probe, painter: PaintCounter, full_repaint: bool) -> tuple[float, ...]:
    """Move the slider to ``step``; (update, stall, stall less waiting for a core, turn cpu) in ms.
    ``full_repaint``: the whole window repainted at once (``repaint()``, as the first version of
    this bench did), else what Qt repaints itself (what changed) until every view has painted."""
    from PySide6.QtCore import QEventLoop, QTimer

    panel = window.panel
    before = list(painter.counts)
    loop = QEventLoop()
    shown: list[float] = []

    def on_shown(s: int) -> None:
        if s == step and not shown:
            shown.append(time.perf_counter())
            loop.quit()

    panel.shown.connect(on_shown)
    probe.start()
    t0 = time.perf_counter()
    panel.slider.setValue(step)
    if not shown:  # a frame computed off the GUI thread: wait for it in the event loop
        QTimer.singleShot(TIMEOUT_MS, loop.quit)
        loop.exec()
    if full_repaint:
        window.repaint()
        app.processEvents()
    else:
        deadline = time.perf_counter() + TIMEOUT_MS / 1000
        while any(a == b for a, b in zip(painter.counts, before)) and time.perf_counter() < deadline:
            app.processEvents()
    t1 = time.perf_counter()
    probe.stop()
    panel.shown.disconnect(on_shown)
    if not shown:
        raise RuntimeError(f"step {step} not shown within {TIMEOUT_MS} ms")
    return (t1 - t0) * 1000, probe.longest_ms, probe.longest_own_ms, probe.longest_cpu_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    parser.add_argument("--tokens", type=int, default=64, help="tokens generated")
    parser.add_argument("--runs", type=int, default=1, help="passes over every step")
    parser.add_argument("--full-repaint", action="store_true", help="repaint the whole window after each move")
    args = parser.parse_args()
    import torch
    from bench_generate import prompt, write_decoder
    from PySide6.QtWidgets import QApplication

    from explorer.app import freeze_startup_objects
    from explorer.panels.generate_panel import GenerateWindow
    from models.pretrained import load_model

    torch.set_num_threads(1)
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        write_decoder(Path(tmp))
        window = GenerateWindow(lambda name: load_model(name, device="cpu"), tmp)
        panel = window.panel
        panel.prompt_edit.setText(prompt(args.prompt))
        panel.new_tokens.setValue(args.tokens)
        window.show()
        freeze_startup_objects()
        start = time.perf_counter()
        panel.generate(now=True)
        settle(app, panel)
        print(f"generate {args.prompt} + {args.tokens} tokens and show the last step: "
              f"{time.perf_counter() - start:.2f} s")  # fmt: skip
        probe, painter = own_stall_probe(), PaintCounter(panel)
        samples = []
        for _ in range(args.runs):
            for step in range(panel.slider.maximum() - 1, -1, -1):
                samples.append(move(app, window, step, probe, painter, args.full_repaint))
            panel.slider.setValue(panel.slider.maximum())
            settle(app, panel)
        update, stall, own, cpu = zip(*samples)
        med, worst = statistics.median(update), max(update)
        how = "the whole window repainted" if args.full_repaint else "what changed painted"
        print(f"step slider -> {how}, over {len(samples)} moves: update median {med:.1f} ms "
              f"(worst {worst:.1f}); longest stall {max(stall):.1f} ms (median {statistics.median(stall):.1f}; "
              f"less waiting for a core: {max(own):.1f}); longest turn CPU {max(cpu):.1f} ms "
              f"[update <= {UPDATE_TARGET_MS:.0f} ms: {'ok' if med <= UPDATE_TARGET_MS else 'SLOW'}; "
              f"stall <= {STALL_TARGET_MS:.0f} ms: {'ok' if max(stall) <= STALL_TARGET_MS else 'OVER'}]")  # fmt: skip
        window.close()


if __name__ == "__main__":
    main()
