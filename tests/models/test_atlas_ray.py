"""``main.py atlas --ray``: the blocks run on a local Ray cluster of 2 CPUs (2 workers, each loading
the model once) and merge to the heads.csv of one process, byte for byte; without Ray, one line
says how to install it. Skipped where Ray is not installed (``make test`` installs it)."""

from __future__ import annotations

import builtins

import pytest
from test_atlas_shards import write_corpus

from main import main


def test_without_ray_one_line_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    corpus = write_corpus(tmp_path / "c.txt", 10)
    assert main(["atlas", "--model", "induction", "--corpus", str(corpus), "--out", str(tmp_path / "a"), "--ray",
                 "--quiet"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --ray needs Ray") and "pip install" in err
    assert not (tmp_path / "a").exists()


def test_ray_with_two_workers_gives_one_process_bytes(tmp_path, capsys):
    ray = pytest.importorskip("ray")
    corpus = write_corpus(tmp_path / "c.txt", 30)
    base = ["atlas", "--model", "induction", "--corpus", str(corpus), "--block", "8", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "one")]) == 0
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert main([*base, "--out", str(tmp_path / "ray"), "--ray"]) == 0
        assert ray.cluster_resources().get("CPU") == 2
        _a_dying_worker_is_retried(tmp_path, corpus)
    finally:
        ray.shutdown()
    for name in ("heads.csv", "top_texts.csv"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    assert not list(tmp_path.glob(".ray.atlas-resume.json"))  # the run's state, removed once written


def _a_dying_worker_is_retried(tmp_path, corpus):
    """A worker that ends in the middle of a block (os._exit) is started again and the block run
    again: the same sums as one process, every block counted once."""
    import torch

    from models.pretrained import load_model
    from models.reads.atlas import run_blocks
    from models.reads.atlas_ray import ray_blocks
    from models.reads.atlas_sums import HeadSums
    from models.reads.corpora import corpus_lines
    from models.reads.survey import METRIC_NAMES

    flag = tmp_path / "died"
    spec = {"model": "induction", "step": None, "device": "cpu", "threads": torch.get_num_threads(),
            "die_once": str(flag)}  # fmt: skip
    sums, seen = HeadSums(METRIC_NAMES, (2, 4)), []
    ray_blocks(spec, corpus_lines(corpus), "local", 2, sums, limit=None, block=8, wanted=lambda b: True,
               on_block=lambda i, s: seen.append(i))  # fmt: skip
    assert flag.exists() and sorted(seen) == [0, 1, 2, 3]
    one = run_blocks(load_model("induction", device="cpu"), corpus_lines(corpus), block=8)
    assert sums.to_json() == one.to_json()
