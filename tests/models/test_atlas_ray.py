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
    finally:
        ray.shutdown()
    for name in ("heads.csv", "top_texts.csv"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    assert not list(tmp_path.glob(".ray.atlas-resume.json"))  # the run's state, removed once written
