"""Benchmark the Generate window: a step of the slider until the window is painted.

    QT_QPA_PLATFORM=offscreen python bench/bench_generate_gui.py [--prompt 64] [--tokens 64]

Generates with the MiniLM-sized random decoder of bench_generate.py (6 layers × 6 heads), then moves
the step slider across every step and times each move until the window has painted (targets:
<= 100 ms to update, no stall of the GUI thread over 50 ms). The step is drawn on the GUI thread:
its time is the stall.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    parser.add_argument("--tokens", type=int, default=64, help="tokens generated")
    args = parser.parse_args()
    import torch
    from bench_generate import prompt, write_decoder
    from PySide6.QtWidgets import QApplication

    from explorer.generate_panel import GenerateWindow
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
        start = time.perf_counter()
        panel.generate(now=True)
        app.processEvents()
        print(f"generate {args.prompt} + {args.tokens} tokens and show the last step: "
              f"{time.perf_counter() - start:.2f} s")  # fmt: skip
        times = []
        for step in range(panel.slider.maximum() - 1, -1, -1):
            t0 = time.perf_counter()
            panel.slider.setValue(step)
            window.repaint()
            app.processEvents()
            times.append((time.perf_counter() - t0) * 1000)
        med, worst = statistics.median(times), max(times)
        print(f"step slider -> window painted, over {len(times)} steps: median {med:.1f} ms, worst {worst:.1f} ms "
              f"[update <= {UPDATE_TARGET_MS:.0f} ms: {'ok' if med <= UPDATE_TARGET_MS else 'SLOW'}; "
              f"stall <= {STALL_TARGET_MS:.0f} ms: {'ok' if worst <= STALL_TARGET_MS else 'OVER'}]")  # fmt: skip
        window.close()


if __name__ == "__main__":
    main()
