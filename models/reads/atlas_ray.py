"""The atlas's blocks as Ray tasks (``main.py atlas --ray [ADDRESS]``): a local cluster by default, a
running cluster's address otherwise.

Each worker is a Ray actor that loads the model once (and checks that its model's files hash as the
driver's), sets torch's threads to the driver's (the thread count chooses the kernels' order of
summation, so it is part of a run), then takes blocks of texts
(:func:`models.reads.atlas.block_sums`): at most two blocks wait per worker, so the driver streams
the corpus and never holds it. A worker that dies is started again and its block run again
(``max_restarts``, ``max_task_retries``); a block gives the same bits in any worker, and the exact
sums merge in any order, so the atlas is the same bits as one process. The driver commits each
finished block to the run's state (models/cli/atlas_run.py), so a killed driver resumes too.

Ray is optional (``pip install '.[ray]'``): imported only here, only when asked for.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from models.errors import InputError

INSTALL = "pip install 'attention-explorer[ray]' (from a clone: pip install '.[ray]', or pip install ray)"
ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding models/, for the workers' imports
RETRIES = 3
WAITING_PER_WORKER = 2
LAST_WORKER_PEAKS: list[int] = []  # each worker's peak resident bytes in the last run (bench/bench_atlas.py)


def require_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError(f"--ray needs Ray, which is not installed: {INSTALL}") from None


class BlockWorker:
    """One Ray worker: the model loaded once, then block after block."""

    def __init__(self, spec: dict) -> None:
        import torch

        from models.pretrained import load_model
        from models.reads.atlas_parts import model_sha256

        torch.set_num_threads(max(1, int(spec.get("threads", 1))))
        self.die_once = spec.get("die_once")  # a file: the first worker to take a block ends (the tests')
        self.model = load_model(spec["model"], device=spec["device"], step=spec["step"])
        self.sha256 = model_sha256(self.model)

    def model_hash(self) -> tuple[str, str]:
        import socket

        return socket.gethostname(), self.sha256

    def block(self, items: list):
        from models.reads.atlas import block_sums

        if self.die_once:
            try:
                os.close(os.open(self.die_once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os._exit(1)  # as a worker killed mid-block: Ray starts it again and retries the block

        return block_sums(self.model, items)

    def peak_bytes(self) -> int:
        """This worker's peak resident memory (VmHWM), for the benchmark."""
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))


def start(address: str) -> None:
    import ray

    if ray.is_initialized():
        return
    try:
        if address == "local":
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise InputError(f"cannot start Ray at {address}: {' '.join(str(exc).split())[:300]}") from None


def workers(spec: dict, count: int | None, model_hash: str | None = None) -> list:
    """``count`` workers (default: the cluster's CPUs), each with the model loaded; their model
    checked against ``model_hash``."""
    import ray

    count = count or max(1, int(ray.cluster_resources().get("CPU", 1)))
    remote = ray.remote(BlockWorker).options(
        num_cpus=1, num_gpus=1 if spec.get("device") == "cuda" else 0, max_restarts=RETRIES,
        max_task_retries=RETRIES,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
                                  "OMP_NUM_THREADS": str(spec.get("threads", 1))}})  # fmt: skip
    actors = [remote.remote(spec) for _ in range(count)]
    try:
        hashes = ray.get([a.model_hash.remote() for a in actors])
    except ray.exceptions.RayError as exc:
        raise InputError(f"a Ray worker could not load {spec['model']}: {_first_line(exc)}") from None
    for host, sha in hashes:
        if model_hash is not None and sha != model_hash:
            raise InputError(f"the Ray worker on {host} has another {spec['model']} (its files' sha256 is "
                             f"{sha[:12]}…, not {model_hash[:12]}…): give every node the same model")  # fmt: skip
    return actors


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


def ray_blocks(spec: dict, texts, address: str, count: int | None, sums, *, limit: int | None, block: int,
               wanted: Callable[[int], bool], on_block: Callable[[int, object], None],
               progress: Callable[[int], None] | None = None, model_hash: str | None = None) -> None:  # fmt: skip
    """Run the ``wanted`` blocks of ``texts`` on Ray workers, merging each finished block into
    ``sums`` (any order: exact) and calling ``on_block(index, sums)``; ``progress(texts done over
    every worker)``."""
    import ray

    from models.reads.atlas import blocks

    start(address)
    actors = workers(spec, count, model_hash)
    waiting: dict = {}  # ref -> (block index, actor)
    load = dict.fromkeys(range(len(actors)), 0)

    def collect() -> None:
        ready, _ = ray.wait(list(waiting), num_returns=1)
        index, who = waiting.pop(ready[0])
        load[who] -= 1
        try:
            part = ray.get(ready[0])
        except ray.exceptions.RayError as exc:
            raise InputError(f"block {index} failed on Ray {RETRIES + 1} times: {_first_line(exc)}") from None
        sums.merge(part)
        on_block(index, sums)
        if progress is not None:
            progress(sums.counters["texts"] + sums.counters["skipped_texts"])

    try:
        for index, items in blocks(texts, block, limit):
            if not wanted(index):
                continue
            while len(waiting) >= WAITING_PER_WORKER * len(actors):
                collect()
            who = min(load, key=load.get)
            load[who] += 1
            waiting[actors[who].block.remote(items)] = (index, who)
        while waiting:
            collect()
    finally:
        for ref in waiting:
            ray.cancel(ref, force=True)
        if not waiting:
            LAST_WORKER_PEAKS[:] = ray.get([a.peak_bytes.remote() for a in actors])
        for actor in actors:
            ray.kill(actor)
