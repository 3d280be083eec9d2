"""Benchmark the head atlas: MiniLM over 1,000 texts of ~20 tokens, every head's metrics and detectors.

    python bench/bench_atlas.py [--texts 1000] [--threads 1] [--gui]

Writes a seeded corpus (one text per line) to a temporary folder, runs ``main.py atlas`` in this
process and prints the wall time, the CPU time and the peak resident memory (targets: ≤ 60 s,
≤ 1.5 GiB). On a shared machine the wall time follows the load; the CPU time does not.
``--gui``: the atlas window (offscreen) on that atlas and on a made-up 32 layers × 32 heads one: the
time to show it, to sort the table by a column and to recolour the map (target ≤ 100 ms each).
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_S = 60.0
TARGET_GIB = 1.5
WORDS = ("the cat dog sat on mat while a was walking in park big small red blue house tree ran jumped over under "
         "because it tired happy people city river morning light station train old friend letter").split()  # fmt: skip


def gui_figures(atlas) -> None:
    import os

    import numpy as np

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from explorer.panels.atlas_window import AtlasPanel
    from models.atlas import Atlas

    app = QApplication.instance() or QApplication([])
    rng = np.random.default_rng(0)
    big = Atlas("made-up", 32, 32, 1000, {c: rng.random((32, 32)) for c in atlas.columns})
    for which in (atlas, big):
        panel = AtlasPanel()
        panel.resize(1300, 760)
        panel.show()
        t = time.perf_counter()
        panel.set_atlas(which)
        app.processEvents()
        shown = time.perf_counter() - t
        t = time.perf_counter()
        panel.table_model.sort(1 + panel.table_model.names.index("entropy_mean"), Qt.SortOrder.DescendingOrder)
        app.processEvents()
        sort = time.perf_counter() - t
        t = time.perf_counter()
        panel.colour_combo.setCurrentText("induction")
        app.processEvents()
        colour = time.perf_counter() - t
        print(f"window, {which.layers}×{which.heads} heads: shown {shown * 1000:.0f} ms, sort {sort * 1000:.1f} ms, "
              f"recolour {colour * 1000:.1f} ms (target ≤ 100 ms)")  # fmt: skip
        panel.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--gui", action="store_true")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from main import main as app_main

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        with open(corpus, "w", encoding="utf-8") as f:
            for _ in range(args.texts):
                f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(14, 20))) + ".\n")
        wall, cpu = time.perf_counter(), time.process_time()
        code = app_main(["atlas", "--model", "minilm", "--corpus", str(corpus), "--out", str(Path(tmp) / "atlas"),
                         "--quiet"])  # fmt: skip
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        rows = (Path(tmp) / "atlas" / "heads.csv").read_text().count("\n") - 1 if code == 0 else 0
        if args.gui and code == 0:
            from models.atlas import read_atlas

            gui_figures(read_atlas(Path(tmp) / "atlas"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    print(f"MiniLM atlas, {args.texts} texts (~20 tokens), {args.threads} thread(s): {wall:.1f} s wall "
          f"(target ≤ {TARGET_S:.0f} s), {cpu:.1f} s CPU, peak RSS {peak:.2f} GiB (target ≤ {TARGET_GIB} GiB), "
          f"{rows} heads, exit {code}")  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
