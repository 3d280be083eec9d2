"""The command line under an address-space limit (issue 12): inputs just under the memory estimate
succeed, just over it are refused with one line before allocating, and an out-of-memory that
happens anyway is one line too. Never a crash or a traceback."""

from __future__ import annotations

import functools
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from models.config import AttentionConfig
from models.memory import estimate_toy_peak

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")

PROBE = """import sys; sys.path.insert(0, sys.argv[1])
import models.cli.export, models.engine.pipeline, models.files.export, torch
from models.memory import available_bytes, _status_bytes
print(available_bytes(), _status_bytes("VmSize"))"""
# The same command line with the check switched off: torch itself runs out of memory.
UNCHECKED = """import sys; sys.path.insert(0, sys.argv[1])
import models.memory
models.memory.available_bytes = lambda: 1 << 62
from models.cli.export import export_main
sys.exit(export_main(sys.argv[2:]))"""
HEADROOM = 512 << 20  # address space allowed beyond what the imports take


def _limit(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _python(args, limit: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          preexec_fn=None if limit is None else functools.partial(_limit, limit))  # fmt: skip


@functools.cache
def _limit_and_room() -> tuple[int, int]:
    """An address-space limit HEADROOM above the imports, and the room the CLI will see under it."""
    base = int(_python(["-c", PROBE, str(ROOT)]).stdout.split()[1])
    limit = base + HEADROOM
    room = int(_python(["-c", PROBE, str(ROOT)], limit).stdout.split()[0])
    return limit, room


def _tokens_for(cfg: AttentionConfig, target: int) -> int:
    """The largest sentence length whose estimate is at most ``target`` bytes."""
    lo, hi = 1, 1 << 16
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if estimate_toy_peak(cfg, mid, mid, False) <= target else (lo, mid - 1)
    return lo


CASES = {
    "scaled-causal": (dict(heads=8, d_model=64, mask="causal"), []),
    "additive-temperature": (dict(heads=4, d_model=32, score="additive", temperature=0.5), []),
}


def _argv(cfg: dict, n: int, out: Path) -> list[str]:
    argv = ["--sentence", " ".join(f"w{i}" for i in range(n)), "--out", str(out)]
    for key, value in cfg.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("fraction", [0.95, 1.05], ids=["just-under", "just-over"])
def test_just_under_the_estimate_succeeds_and_just_over_is_refused(tmp_path, case, fraction):
    limit, room = _limit_and_room()
    cfg = CASES[case][0]
    n = _tokens_for(AttentionConfig(**cfg), int(room * fraction))
    done = _python(["main.py", "export", *_argv(cfg, n, tmp_path / "run")], limit)
    if fraction < 1:
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "run" / "weights.npy").is_file()
    else:
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
        assert f"{n}×{n} tokens with {cfg['heads']} heads needs about" in done.stderr
        assert list(tmp_path.iterdir()) == []


def test_an_out_of_memory_that_happens_anyway_is_one_line(tmp_path):
    limit, room = _limit_and_room()
    # Wide heads: Q, K, V (kept whole) are what runs out, whatever the n×n stages do lazily.
    cfg = dict(heads=8, d_model=64, d_k=2048, mask="causal")
    # 4× the room, not 1.5×: in one full run 1.5× fitted and the export was written (the room is
    # measured once, in another process; its cause was not found again in isolation).
    n = _tokens_for(AttentionConfig(**cfg), int(room * 4))
    done = _python(["-c", UNCHECKED, str(ROOT), *_argv(cfg, n, tmp_path / "run")], limit)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("error: not enough memory for this input") and done.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_a_toy_too_large_for_memory_says_how_many_tokens_fit(monkeypatch):
    """Issue 34: checked before starting, the message says what fits (and that many tokens do fit)."""
    import models.engine.pipeline as pipeline
    import models.memory as memory
    from models.config import AttentionConfig, AttentionRequest, InputError

    cfg = AttentionConfig(heads=8, d_model=512, mask="causal", max_tokens=1 << 17)
    free = memory.estimate_toy_peak(cfg, 20000, 20000, False)
    monkeypatch.setattr(memory, "available_bytes", lambda: free)
    with pytest.raises(InputError, match=r"^131072×131072 tokens with 8 heads needs about .* at most 20,0\d\d tokens "
                                         r"fit with these settings") as refused:  # fmt: skip
        pipeline.run(AttentionRequest(config=cfg, sentence=" ".join(["w"] * 131072)))
    fit = int(str(refused.value).split("at most ")[1].split(" ")[0].replace(",", ""))
    assert fit >= 20000 and memory.estimate_toy_peak(cfg, fit + 1, fit + 1, False) > free
