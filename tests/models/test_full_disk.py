"""A full disk, for every command that writes a folder (issue 36, item 2): one ``error:`` line,
exit 2, nothing left beside the user's file, and that file byte for byte. The disk is a small
tmpfs mounted in a private mount namespace (``unshare -rm``), nearly filled by the user's file;
where no tmpfs can be mounted, a file-size limit (``prlimit --fsize``) stands in for it.

Before: ``generate --out FULL/g`` and encoder-decoder ``export --all-layers`` wrote
``attention.npy`` through a memory map and died of SIGBUS (exit 135), leaving ``.partial-*``."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from command_outputs import WRITES, history_of
from encdec_refs import SOURCE, TARGET, build
from test_pretrained_loader import write_tiny_gpt2

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAIN = [sys.executable, str(ROOT / "main.py")]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "QT_QPA_PLATFORM": "offscreen"}
DISK_SIZE = "32k"  # 8 pages of 4 kB, most of them the user's file
FREE_PAGES = (1, 2)  # a write fails at its first page, or inside a file (a memory map: SIGBUS)


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "tmpfs", "/mnt"], capture_output=True)
    return probe.returncode == 0


CAN_MOUNT = _can_mount()


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("models")
    spec = importlib.util.spec_from_file_location("bench_generate", ROOT / "bench" / "bench_generate.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (base / "dec").mkdir()
    bench.write_decoder(base / "dec", layers=2, d=16, heads=2, ffn=32, words=bench.DEMO_WORDS, scale=0.35)
    (base / "t5").mkdir()
    build(base / "t5", "t5")
    write_tiny_gpt2(base / "gpt2")
    np.save(base / "e.npy", np.random.default_rng(0).standard_normal((200, 400)))  # a session of ~600 kB
    return {"decoder": base / "dec", "t5": base / "t5", "gpt2": base / "gpt2", "embeddings": base / "e.npy"}


def _writers(m: dict[str, Path], out: Path) -> dict[str, list[str]]:
    """Every command that writes a folder, with arguments that write more than the free space."""
    long = "the cat sat on the mat " * 8
    return {
        "export": ["export", "--sentence", long, "--heads", "4", "--d-model", "32", "--out", str(out)],
        "all-layers": ["export", "--model", str(m["gpt2"]), "--sentence", "the cat sat on the mat the dog ran",
                       "--all-layers", "--out", str(out)],  # fmt: skip
        "encdec-all-layers": ["export", "--model", str(m["t5"]), "--sentence", SOURCE, "--cross-sentence", TARGET,
                              "--all-layers", "--block", "encoder", "--out", str(out)],  # fmt: skip
        "generate": ["generate", "--model", str(m["decoder"]), "--prompt", "the cat sat on the mat",
                     "--max-new-tokens", "40", "--out", str(out)],  # fmt: skip
        "atlas": ["atlas", "--model", str(m["gpt2"]), "--out", str(out), "--quiet"],
        "timeline": ["timeline", "--model", str(history_of(m["gpt2"])), "--out", str(out), "--quiet"],
        "train": ["train", "--steps", "2", "--out", str(out)],  # was a SafetensorError traceback
        # the window's session (its screenshot beside the disk, where there is room)
        "session": ["--embeddings", str(m["embeddings"]), "--d-model", "400", "--heads", "2", "--screenshot",
                    str(m["embeddings"].with_name("shot.png")), "--save-session", str(out)],  # fmt: skip
    }


WRITERS = list(WRITES)  # every output that reaches the disk (tests/models/command_outputs.py)


def on_full_disk(tmp_path: Path, argv_for, free_pages: int = 1) -> dict:
    """Run ``argv_for(out)`` with ``out`` on a disk with ``free_pages`` pages free; what happened
    (full_disk_child.py)."""
    user = tmp_path / "user.bin"
    user.write_bytes(os.urandom((8 - free_pages) * 4096 - 100))
    disk = tmp_path / "disk"
    if CAN_MOUNT:
        child = subprocess.run(["unshare", "-rm", sys.executable, str(HERE / "full_disk_child.py"), str(disk),
                                DISK_SIZE, str(user), "--", *MAIN, *argv_for(disk / "out")],
                               capture_output=True, text=True, env=ENV, timeout=600)  # fmt: skip
        assert child.returncode == 0, child.stderr
        return json.loads(child.stdout.splitlines()[-1])
    disk.mkdir()
    shutil.copyfile(user, disk / user.name)
    limit = f"--fsize={free_pages * 4096}"
    result = subprocess.run(["prlimit", limit, *MAIN, *argv_for(disk / "out")], capture_output=True, text=True,
                            env=ENV, timeout=600)  # fmt: skip
    return {"returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
            "left": sorted(p.name for p in disk.iterdir()),
            "user_same": (disk / user.name).read_bytes() == user.read_bytes()}  # fmt: skip


@pytest.mark.parametrize("free_pages", FREE_PAGES)
@pytest.mark.parametrize("writer", WRITERS)
def test_a_full_disk_is_one_line_and_leaves_only_the_users_file(tmp_path, folders, writer, free_pages):
    got = on_full_disk(tmp_path, lambda out: _writers(folders, out)[writer], free_pages)
    err = [line for line in got["stderr"].splitlines() if line.strip()]
    assert got["returncode"] == 2, got
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in got["stderr"], got["stderr"]
    # a full disk met while writing, or (export, issue 34) the free space checked before anything is written
    assert any(s in err[0] for s in ("No space left", "File too large", "free; nothing was written")), err[0]
    assert got["left"] == ["user.bin"], got["left"]
    assert got["user_same"]


def test_every_command_that_writes_a_folder_is_tried():
    """The list above is main.py's commands that write a folder (export twice: one layer, all layers)."""
    paths = {"decoder": Path(), "t5": Path(), "gpt2": Path(), "embeddings": Path("e.npy")}
    commands = {argv[0] for argv in _writers(paths, Path("o")).values() if not argv[0].startswith("--")}
    sys.path.insert(0, str(ROOT))
    import main

    source = (ROOT / "main.py").read_text(encoding="utf-8")
    names = set(getattr(main, "COMMANDS", ())) or set(re.findall(r'argv\[:1\] == \["(\w+)"\]', source))
    assert names - {"explain", "why"} == commands  # explain and why print; every other command writes a folder
