"""Benchmark the head atlas: MiniLM over 1,000 texts of ~20 tokens, every head's metrics and detectors;
with ``--big``, a 1.1 B-parameter bf16 checkpoint over 100 texts of ~64 tokens.

    python bench/bench_atlas.py [--texts 1000] [--threads 1] [--gui]
    python bench/bench_atlas.py --big [--texts 100] [--threads 1] [--dir DIR] [--keep]
    python bench/bench_atlas.py --ray [--texts 10000] [--workers 2] [--block 256] [--only one|ray]

``--ray``: MiniLM without the detectors, one process (one torch thread) against a local Ray cluster of
``--workers`` workers (one thread each), each run in a fresh process: wall and CPU time, the speed-up
(Ray's start counted), the peak resident memory of the driver and of each worker, and whether the
two heads.csv are the same bytes.

Writes a seeded corpus (one text per line) to a temporary folder, runs ``main.py atlas`` in this
process and prints the wall time, the CPU time and the peak resident memory (targets: ≤ 60 s,
≤ 1.5 GiB). On a shared machine the wall time follows the load; the CPU time does not.
``--gui``: the atlas window (offscreen) on that atlas and on a made-up 32 layers × 32 heads one: the
time to show it, to sort the table by a column and to recolour the map (target ≤ 100 ms each).

``--big``: bench_big_checkpoint.py's random TinyLlama-shaped checkpoint (its writer, imported: 1.10 B
parameters, 2.2 GB of bf16 in 3 shards, written to a temporary folder or ``--dir``), a seeded corpus
of texts of 60–68 words of its vocabulary (61–69 tokens with ``<s>``), then ``main.py atlas`` (the
detectors too) in a fresh process, its files first dropped from the page cache: wall time, CPU time
and peak RSS (VmHWM) against the targets: ≤ 10 min, and the big-checkpoint memory rule, the bf16
weights of the layers read (all 22) + 1 GiB (2.80 GiB), as bench_big_checkpoint.py's for layer 21.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_S = 60.0
TARGET_BIG_S = 600.0
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
    from models.reads.atlas import Atlas

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


BIG_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads({threads})
from main import main
wall, cpu = time.perf_counter(), time.process_time()
code = main(["atlas", "--model", {folder!r}, "--corpus", {corpus!r}, "--out", {out!r}, "--quiet"])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
usage = resource.getrusage(resource.RUSAGE_SELF)
# VmHWM starts afresh with this process (ru_maxrss would be inherited from the parent that forked it)
peak = [int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps(dict(code=code, wall=wall, cpu=cpu, peak=peak)))
"""


def big(args) -> int:
    """The 1.1 B bf16 checkpoint's atlas in a fresh process (see the module docstring)."""
    import json
    import shutil
    import subprocess

    import bench_big_checkpoint as ckpt

    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="big-atlas-"))
    folder = base / "tinyllama-shaped"
    try:
        if not (folder / "model.safetensors.index.json").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            print(f"writing a random bf16 checkpoint into {folder} ...", flush=True)
            ckpt.write_checkpoint(folder, 3)
        layer_bytes = 2 * sum(ckpt._numel(s) for s in ckpt.layer_shapes(0).values())  # bf16, one layer
        target = ckpt.LAYERS * layer_bytes + ckpt.GIB
        rng = random.Random(0)
        corpus, out = base / "corpus.txt", base / "atlas"
        with open(corpus, "w", encoding="utf-8") as f:
            for _ in range(args.texts):
                f.write(" ".join(rng.choice(ckpt.WORDS) for _ in range(rng.randint(60, 68))) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        ckpt.drop_page_cache(folder)
        code = BIG_CHILD.format(root=str(ROOT), threads=args.threads, folder=str(folder), corpus=str(corpus),
                                out=str(out))  # fmt: skip
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if run.returncode != 0 or not run.stdout.strip():
            print(run.stderr, file=sys.stderr)
            return run.returncode or 1
        r = json.loads(run.stdout.strip().splitlines()[-1])
        man = json.loads((out / "manifest.json").read_text()) if r["code"] == 0 else {}
        ok = r["code"] == 0 and r["wall"] <= TARGET_BIG_S and r["peak"] <= target
        print(f"1.1 B bf16 atlas, {man.get('texts', 0)} texts ({man.get('tokens', 0)} tokens, {man.get('batches', 0)} "
              f"batches) + detectors, {args.threads} thread(s), cold start: {r['wall']:.0f} s wall (target ≤ "
              f"{TARGET_BIG_S:.0f} s), {r['cpu']:.0f} s CPU, peak RSS {r['peak'] / ckpt.GIB:.2f} GiB (target ≤ "
              f"{target / ckpt.GIB:.2f} GiB: the 22 layers in bf16 + 1 GiB), exit {r['code']}: "
              f"{'ok' if ok else 'MISSED'}")  # fmt: skip
        return r["code"]
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)


RAY_CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
from main import main
argv = ["atlas", "--model", "minilm", "--corpus", {corpus!r}, "--out", {out!r}, "--quiet", "--no-detectors",
        "--block", "{block}"]
peaks = []
if {ray}:
    import ray
    from models.reads import atlas_ray
    ray.init(num_cpus={workers}, include_dashboard=False, log_to_driver=False)
    argv += ["--ray", "--workers", "{workers}"]
wall, cpu = time.perf_counter(), time.process_time()
code = main(argv)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
if {ray}:
    peaks = atlas_ray.LAST_WORKER_PEAKS
peak = [int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps(dict(code=code, wall=wall, cpu=cpu, peak=peak, workers=peaks)))
"""


def ray_bench(args) -> int:
    """MiniLM's atlas over ``--texts`` texts: one process (1 torch thread) against Ray with ``--workers``
    workers (1 thread each) on a local cluster, each in a fresh process; the same heads.csv bytes."""
    import json
    import subprocess

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        with open(corpus, "w", encoding="utf-8") as f:
            for _ in range(args.texts):
                f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(14, 20))) + ".\n")
        results = {}
        for ray in {"one": (False,), "ray": (True,)}.get(args.only, (False, True)):
            out = Path(tmp) / ("ray" if ray else "one")
            code = RAY_CHILD.format(root=str(ROOT), corpus=str(corpus), out=str(out), ray=ray, workers=args.workers,
                                   block=args.block)  # fmt: skip
            run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if run.returncode != 0 or not run.stdout.strip():
                print(run.stderr[-3000:], file=sys.stderr)
                return run.returncode or 1
            results[ray] = json.loads(run.stdout.strip().splitlines()[-1])
            results[ray]["texts_per_s"] = args.texts / results[ray]["wall"]
        if len(results) == 1:
            return only_one(args, results)
        same = (Path(tmp) / "one" / "heads.csv").read_bytes() == (Path(tmp) / "ray" / "heads.csv").read_bytes()
    one, ray = results[False], results[True]
    gib = 2**30
    print(f"MiniLM atlas, {args.texts} texts (~20 tokens), blocks of {args.block}, no detectors, 1 torch thread a "
          f"process, load "
          f"{os.getloadavg()[0]:.1f}:")
    print(f"  one process:       {one['wall']:.1f} s wall, {one['cpu']:.1f} s CPU, "
          f"peak RSS {one['peak'] / gib:.2f} GiB")
    print(f"  Ray, {args.workers} workers:    {ray['wall']:.1f} s wall (speed-up {one['wall'] / ray['wall']:.2f}x, "
          f"Ray's start included), driver peak RSS {ray['peak'] / gib:.2f} GiB, each worker's "
          f"{', '.join(f'{p / gib:.2f}' for p in ray['workers'])} GiB")  # fmt: skip
    print(f"  heads.csv the same bytes: {same}")
    return 0 if same and one["code"] == ray["code"] == 0 else 1


def only_one(args, results) -> int:
    """``--only one|ray``: one side's figures (a long run to completion, e.g. 100,000 texts on Ray)."""
    (ray, r), gib = next(iter(results.items())), 2**30
    side = f"Ray, {args.workers} workers" if ray else "one process"
    workers = f", each worker's {', '.join(f'{p / gib:.2f}' for p in r['workers'])} GiB" if ray else ""
    print(f"MiniLM atlas, {args.texts} texts (~20 tokens), blocks of {args.block}, no detectors, 1 torch thread a "
          f"process, {side}, load {os.getloadavg()[0]:.1f}: {r['wall']:.1f} s wall, {r['texts_per_s']:.1f} texts/s, "
          f"peak RSS {r['peak'] / gib:.2f} GiB{workers}, exit {r['code']}")
    return r["code"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=None, help="default 1000 (MiniLM), 100 (--big)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--gui", action="store_true")
    ap.add_argument("--big", action="store_true", help="the 1.1 B-parameter bf16 checkpoint instead of MiniLM")
    ap.add_argument("--dir", help="--big: where the checkpoint is (written there if missing, then kept)")
    ap.add_argument("--keep", action="store_true", help="--big: keep the temporary checkpoint")
    ap.add_argument("--ray", action="store_true", help="one process against Ray workers (default 10,000 texts)")
    ap.add_argument("--workers", type=int, default=2, help="--ray: Ray workers on a local cluster (default 2)")
    ap.add_argument("--only", choices=("one", "ray"), help="--ray: run one side only (e.g. 100,000 texts on Ray)")
    ap.add_argument("--block", type=int, default=256, help="--ray: texts a block (default 256)")
    args = ap.parse_args()
    if args.ray:
        args.texts = args.texts or 10_000
        return ray_bench(args)
    if args.big:
        args.texts = args.texts or 100
        return big(args)
    args.texts = args.texts or 1000
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
            from models.reads.atlas import read_atlas

            gui_figures(read_atlas(Path(tmp) / "atlas"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    print(f"MiniLM atlas, {args.texts} texts (~20 tokens), {args.threads} thread(s): {wall:.1f} s wall "
          f"(target ≤ {TARGET_S:.0f} s), {cpu:.1f} s CPU, peak RSS {peak:.2f} GiB (target ≤ {TARGET_GIB} GiB), "
          f"{rows} heads, exit {code}")  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
