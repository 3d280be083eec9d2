"""Benchmark the whole-model survey: every layer's weights + head metrics + rollout, and the model view.

    python bench/bench_survey.py [--runs 5] [--no-gui] [--threads N]

1. MiniLM (bundled), 128 tokens: all weights + metrics + rollout (target <= 0.5 s), and with the
   GUI: the model view painted after the sentence changes (target <= 1 s).
2. A 12-layer, 12-head BERT-base-size model with random weights (transformers from_config +
   save_pretrained into a temporary folder, MiniLM's tokenizer) at 512 tokens: the same compute,
   the model view painted (target <= 5 s) and the largest GUI-thread step.
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

SMALL_TARGET_S = 0.5
SMALL_PAINT_TARGET_S = 1.0
BIG_PAINT_TARGET_S = 5.0
LONG_TEXT = " ".join(["the quick brown fox jumps over the lazy dog while attention heads look around"] * 60)


def median_s(fn, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def survey_once(model, tokens: int):
    from models.reads.survey import head_metrics, rollout

    model.clear_cache()  # a new sentence: every block runs
    _, weights = model.layer_weights(LONG_TEXT, max_tokens=tokens)[:2]
    return weights, head_metrics(weights), rollout(weights)


def compute(model, tokens: int, runs: int, target: float | None) -> None:
    t, best = median_s(lambda: survey_once(model, tokens), runs)
    model.clear_cache()
    t0 = time.perf_counter()
    model.layer_weights(LONG_TEXT, max_tokens=tokens)
    t_w = time.perf_counter() - t0
    L, h = model.num_layers, model.num_heads
    mark = "" if target is None else f"  (target <= {target} s: {'ok' if t <= target else 'SLOW'})"
    print(f"  {L} layers × {h} heads, {tokens} tokens: weights+metrics+rollout {t:.3f} s median, "
          f"best {best:.3f} s (weights alone {t_w:.3f} s){mark}")  # fmt: skip


def gui(model, tokens: int, target: float) -> None:
    """Time from 'sentence changed' to the model view painted, through the panel's own worker."""
    from PySide6.QtWidgets import QApplication

    from explorer.panels.survey_panel import SurveyPanel

    app = QApplication.instance() or QApplication([])
    panel = SurveyPanel()
    panel.resize(1400, 900)
    panel.show()
    app.processEvents()
    longest, longest_cpu = [0.0], [0.0]
    last, last_cpu = [time.perf_counter()], [time.thread_time()]

    def tick():  # the largest gap between event-loop turns = the longest GUI stall
        now, cpu = time.perf_counter(), time.thread_time()
        longest[0] = max(longest[0], now - last[0])
        # The GUI thread's own CPU time in that turn: the stall less the time it waited for a core
        longest_cpu[0] = max(longest_cpu[0], cpu - last_cpu[0])
        last[0], last_cpu[0] = now, cpu

    from PySide6.QtCore import QTimer

    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(0)
    for attempt in range(2):  # the second run has warm caches of Qt/pyqtgraph
        model.clear_cache()
        longest[0], last[0], longest_cpu[0], last_cpu[0] = 0.0, time.perf_counter(), 0.0, time.thread_time()
        start = time.perf_counter()
        panel.compute(model, LONG_TEXT, max_tokens=tokens)
        while not panel.model_view.painted_layers == model.num_layers or panel.busy:
            app.processEvents()
        app.processEvents()
        t = time.perf_counter() - start
        if attempt:
            print(f"  model view painted {t:.3f} s after the request (target <= {target} s: "
                  f"{'ok' if t <= target else 'SLOW'}); longest GUI stall {longest[0] * 1000:.0f} ms "
                  f"(of it the GUI thread's CPU: {longest_cpu[0] * 1000:.0f} ms)")  # fmt: skip
    timer.stop()
    panel.close()


def big_model(folder: Path):
    import torch
    import transformers

    from models.pretrained import load_model, resolve_model

    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=12, num_attention_heads=12, hidden_size=768,
                                     intermediate_size=3072, max_position_embeddings=512)  # fmt: skip
    transformers.BertModel(config).save_pretrained(folder)
    (folder / "tokenizer.json").write_bytes((resolve_model("minilm") / "tokenizer.json").read_bytes())
    return load_model(folder, device="cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--no-gui", action="store_true")
    args = parser.parse_args()
    import torch

    from models.pretrained import load_model

    threads = args.threads or torch.get_num_threads()
    # The headless figures use these threads; the panel's worker leaves a core to the GUI (as in the app).
    torch.set_num_threads(threads)
    print(f"torch threads: {threads} headless, {max(1, (os.cpu_count() or 2) - 1)} behind the panel")
    print("MiniLM (bundled):")
    minilm = load_model("minilm", device="cpu")
    compute(minilm, 128, args.runs, SMALL_TARGET_S)
    if not args.no_gui:
        gui(minilm, 128, SMALL_PAINT_TARGET_S)
    with tempfile.TemporaryDirectory() as tmp:
        print("BERT-base size, random weights:")
        big = big_model(Path(tmp))
        torch.set_num_threads(threads)
        compute(big, 512, max(1, args.runs // 2), None)
        if not args.no_gui:
            gui(big, 512, BIG_PAINT_TARGET_S)


if __name__ == "__main__":
    main()
