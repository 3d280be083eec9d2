"""An atlas in parts (issue 49): every way of splitting a 200-text corpus into 1 to 7 parts merges to
the heads.csv (and top_texts.csv) of one run, byte for byte; ``atlas merge`` refuses parts of another
model, corpus or split, a missing, repeated or unfinished part with one line naming it; a run
killed (SIGKILL) after a committed block resumes there and counts nothing twice."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from main import main
from models.reads.atlas_parts import Part, read_part, write_part
from models.reads.atlas_sums import HeadSums
from models.reads.survey import METRIC_NAMES

ROOT = Path(__file__).resolve().parents[2]
BLOCK = 25  # 8 blocks of the 200 texts: every part of 1 to 7 holds at least one
WORDS = "the cat dog sat on mat while a was walking in park big small red blue house tree ran".split()


def write_corpus(path: Path, n: int = 200) -> Path:
    rng = random.Random(49)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))) for _ in range(n)]
    lines[7] = ""  # a blank line: not a text, but its line number counts
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(*argv) -> None:
    assert main([*map(str, argv), "--quiet"] if argv[0] != "merge" else ["atlas", *map(str, argv)]) == 0


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """The corpus, one process's atlas of it, and its three parts."""
    tmp = tmp_path_factory.mktemp("shards")
    corpus = write_corpus(tmp / "c.txt")
    base = ["atlas", "--model", "induction", "--corpus", corpus, "--block", BLOCK]
    run(*base, "--out", tmp / "one")
    for i in (1, 2, 3):
        run(*base, "--shard", f"{i}/3", "--out", tmp / f"p{i}.json")
    return tmp, corpus, base


def same_files(a: Path, b: Path) -> None:
    for name in ("heads.csv", "top_texts.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_three_shards_merge_to_one_runs_bytes_in_any_order(one_run, capsys):
    tmp, _, _ = one_run
    parts = [read_part(tmp / f"p{i}.json") for i in (1, 2, 3)]
    assert [p.sums.counters["texts"] for p in parts] == [75, 74, 50]  # blocks 0,3,6 / 1,4,7 / 2,5 of 199 texts
    assert parts[0].detectors is not None and parts[1].detectors is None
    run("merge", tmp / "p3.json", tmp / "p1.json", tmp / "p2.json", "--out", tmp / "merged")
    same_files(tmp / "one", tmp / "merged")
    man = json.loads((tmp / "merged" / "manifest.json").read_text())
    assert man["texts"] == 199 and man["parts"] == 3


def test_every_split_into_1_to_7_parts_merges_to_the_same_bytes(one_run):
    """Each block's sums computed once (a block gives the same bits in any part); the parts of every
    split written as ``--shard`` writes them and merged by ``atlas merge``."""
    from models.pretrained import load_model
    from models.reads.atlas import block_sums, blocks, corpus_lines

    tmp, corpus, _ = one_run
    template = read_part(tmp / "p1.json")
    model = load_model("induction", device="cpu")
    sums = {i: block_sums(model, items) for i, items in blocks(corpus_lines(corpus), BLOCK)}
    assert len(sums) == 8
    for n in range(1, 8):
        paths = []
        for i in range(1, n + 1):
            total = HeadSums(METRIC_NAMES, template.sums.shape)
            mine = [b for b in sums if b % n == i - 1]
            for b in reversed(mine):  # merged in another order than a run's
                total.merge(sums[b])
            part = Part({**template.key, "parts": n}, i, total, template.model_info, template.corpus, mine, True,
                        template.detectors if i == 1 else None)  # fmt: skip
            paths.append(tmp / f"split{n}-{i}.json")
            write_part(paths[-1], part)
        run("merge", *paths[::-1], "--out", tmp / f"merged{n}")
        same_files(tmp / "one", tmp / f"merged{n}")


def _edit(src: Path, dst: Path, change) -> Path:
    data = json.loads(src.read_text())
    change(data)
    dst.write_text(json.dumps(data))
    return dst


@pytest.mark.parametrize("case, words", [
    ("duplicate", "part 2 of 3 is given twice"),
    ("missing", "part 3 of 3 is missing"),
    ("split", "another split (4 parts, not 3)"),
    ("corpus", "another corpus"),
    ("model", "another model"),
    ("unfinished", "is unfinished"),
    ("not a part", "is not an atlas part"),
])  # fmt: skip
def test_merge_refuses_parts_of_another_run_in_one_line(one_run, capsys, case, words):
    tmp, _, _ = one_run
    p1, p2, p3 = (tmp / f"p{i}.json" for i in (1, 2, 3))
    bad = tmp / f"bad-{case.replace(' ', '-')}.json"
    parts = {
        "duplicate": lambda: [p1, p2, p2, p3],
        "missing": lambda: [p1, p2],
        "split": lambda: [p1, p2, _edit(p3, bad, lambda d: d["key"].update(parts=4))],
        "corpus": lambda: [p1, p2, _edit(p3, bad, lambda d: d["key"].update(corpus_sha256="0" * 64))],
        "model": lambda: [p1, p2, _edit(p3, bad, lambda d: d["key"].update(model_sha256="f" * 64))],
        "unfinished": lambda: [p1, p2, _edit(p3, bad, lambda d: d.update(complete=False))],
        "not a part": lambda: [p1, p2, _edit(p3, bad, lambda d: d.update(format="something else"))],
    }[case]()
    out = tmp / f"never-{case.replace(' ', '-')}"
    capsys.readouterr()
    assert main(["atlas", "merge", *map(str, parts), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and words in err, err
    assert not out.exists()


KILLER = """
import os, signal, sys
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads({threads})  # the test's own count (the GUI tests' worker leaves the process at cores - 1)
import models.cli.atlas as cli
real, commits = cli.write_part, []
def write_part(path, state):
    real(path, state)
    commits.append(1)
    if len(commits) == {after}:
        os.kill(os.getpid(), signal.SIGKILL)  # killed after a committed block, in the middle of the run
cli.write_part = write_part
from main import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize("shard", [None, "2/3"])
def test_a_killed_run_resumes_where_it_stopped_and_counts_nothing_twice(one_run, capsys, shard):
    tmp, corpus, base = one_run
    name = "resumed" if shard is None else "resumed-part.json"
    out = tmp / name
    argv = [*map(str, base), "--out", str(out), "--quiet", *(["--shard", shard] if shard else [])]
    killer = KILLER.format(root=str(ROOT), after=2, argv=argv, threads=torch.get_num_threads())
    child = subprocess.run([sys.executable, "-c", killer], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert child.returncode == -9, child.stderr
    state = out if shard else tmp / f".{name}.atlas-resume.json"
    kept = read_part(state)
    assert len(kept.blocks) == 2 and not kept.complete and kept.sums.counters["texts"] == 2 * BLOCK
    assert not out.is_dir()
    capsys.readouterr()
    assert main(argv) == 0
    assert "resuming from" in capsys.readouterr().err
    if shard is None:
        same_files(tmp / "one", out)
        assert json.loads((out / "manifest.json").read_text())["texts"] == 199 and not state.exists()
    else:
        again = read_part(out)
        assert again.complete and again.sums.to_json() == read_part(tmp / "p2.json").sums.to_json()
        assert sorted(again.blocks) == [1, 4, 7]


def test_a_run_resumed_with_another_thread_count_goes_on_with_the_saved_one(one_run, capsys):
    """Killed in a process with 2 torch threads, resumed in one with 1 (the GUI tests' worker leaves
    pytest at cores - 1): it went on from scratch, silently, and a shard was refused as another run's."""
    tmp, corpus, base = one_run
    out = tmp / "threads-part.json"
    argv = [*map(str, base), "--out", str(out), "--quiet", "--shard", "1/3"]
    killer = KILLER.format(root=str(ROOT), after=1, argv=argv, threads=2)
    assert subprocess.run([sys.executable, "-c", killer], cwd=ROOT, capture_output=True, timeout=600).returncode == -9
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        capsys.readouterr()
        assert main(argv) == 0
        assert "resuming from" in capsys.readouterr().err
        assert torch.get_num_threads() == 2  # the saved blocks' count, so that their bits and the rest's agree
    finally:
        torch.set_num_threads(before)
    assert read_part(out).complete and read_part(out).key["torch_threads"] == 2
