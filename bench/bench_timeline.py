"""Benchmark the training timeline's slider on the shipped ``induction`` model: the time from a
slider step to the main window showing that step's trace (target <= 100 ms per step).

    QT_QPA_PLATFORM=offscreen python bench/bench_timeline.py [--steps 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

TARGET_MS = 100.0


def main() -> int:
    import torch
    from PySide6.QtWidgets import QApplication

    from explorer.files.persistence import open_settings
    from explorer.state import Inputs
    from explorer.window import MainWindow
    from models.training.data import repeated_block

    torch.set_num_threads(1)
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        settings = open_settings(Path(tmp) / "s.ini")
        inputs = dataclasses.replace(Inputs(), model="induction", sentence=repeated_block(), layer=1)
        window = MainWindow(settings, inputs, persist=False)
        window.show()

        def settle():
            while not window.is_settled():
                app.processEvents()
                time.sleep(0.001)

        def painted() -> bool:  # the step's trace on screen (reads for hover and focus may still run)
            display = window.state.display
            return (display is not None and display.generation == window.worker.latest_generation
                    and window.matrix_view.settled())  # fmt: skip

        settle()
        start = time.perf_counter()
        timeline = window.windows.open_timeline()
        print(f"timeline opened in {(time.perf_counter() - start) * 1000:.0f} ms "
              f"({len(timeline.timeline.steps)} steps traced)")  # fmt: skip
        app.processEvents()
        times, settled = [], []
        n = len(timeline.timeline.steps)
        for i in range(args.steps):
            start = time.perf_counter()
            timeline.slider.setValue((n - 1 - i) % n)
            app.processEvents()
            while not painted():
                app.processEvents()
                time.sleep(0.001)
            times.append((time.perf_counter() - start) * 1000)
            settle()
            settled.append((time.perf_counter() - start) * 1000)
        med = statistics.median(times)
        print(f"load average {os.getloadavg()[0]:.1f}; slider step -> trace painted: median {med:.0f} ms, "
              f"max {max(times):.0f} ms over {len(times)} steps (target <= {TARGET_MS:.0f} ms) "
              f"{'OK' if med <= TARGET_MS else 'OVER'}; -> every read done (settled): median "
              f"{statistics.median(settled):.0f} ms")  # fmt: skip
        timeline.close()
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
