"""Run ``main.py`` many times from one process that has imported everything once, for the hostile
cases of every screenshot: each run is a fork (so a run starts as a fresh process would, and ends
by its own exit status or signal), its stdout and stderr captured at the file descriptors.

``python forked_runs.py [--mount DIR SIZE SEED] < RUNS.json`` where RUNS is a list of
``{"argv": [...], "case": CASE, "limit": N, "cwd": FOLDER}`` (``cwd`` optional); prints one JSON
object: ``runs``, a list of ``{"returncode", "stdout", "stderr", "seconds"}`` (a negative code: the
signal that ended the run), and ``disk``. With ``--mount`` (run it under ``unshare -rm``: a private
mount namespace), a tmpfs of SIZE is mounted on DIR first, SEED's files copied into it (the
user's files) and the rest filled but one page: a full disk for every run; ``disk`` is then
``{name: sha256}`` of what DIR holds at the end.
CASE, set up in the fork before ``main.py`` runs:

- ``"plain"``: nothing (a FIFO, an overflowing model: the hostile part is in the arguments);
- ``"fsize"``: RLIMIT_FSIZE of N bytes (``prlimit --fsize``);
- ``"memory"``: RLIMIT_AS of the address space in use plus N bytes (``prlimit --as``, after the
  imports: Python, torch and Qt have started, the job has not);
- ``"signal"``: SIGTERM sent to itself inside the first write of a ``.png``, just before the data
  is synced (as tests/models/writer_child.py pauses for the parent's signal);
- ``"stdout full"``: stdout is ``/dev/full`` (every write fails with ENOSPC);
- ``"stdout closed"``: stdout is a pipe whose reader has gone (``| true``: EPIPE).
"""

import hashlib
import json
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import torch  # noqa: E402, F401

import explorer.app  # noqa: E402, F401
import models.io.atomic as atomic  # noqa: E402
import models.pretrained  # noqa: E402, F401
from explorer.widgets.window_size import use_desktop_offscreen_screen  # noqa: E402
from main import interrupted_main  # noqa: E402

use_desktop_offscreen_screen()  # the screen the screenshot tests use


def _address_space() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))


def _signal_inside_png_writes() -> None:
    real = atomic.sync_file

    def sync(f):
        if os.readlink(f"/proc/self/fd/{f.fileno()}").endswith(".png"):
            os.kill(os.getpid(), signal.SIGTERM)
        real(f)

    atomic.sync_file = sync


def _set_up(case: str, limit: int) -> None:
    signal.alarm(300)  # a hang ends the run (SIGALRM) instead of the test run
    if case == "fsize":
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    elif case == "memory":
        resource.setrlimit(resource.RLIMIT_AS, (_address_space() + limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    elif case == "signal":
        _signal_inside_png_writes()
    elif case in ("stdout full", "stdout closed"):
        if case == "stdout full":
            fd = os.open("/dev/full", os.O_WRONLY)
        else:
            reader, fd = os.pipe()
            os.close(reader)
        os.dup2(fd, 1)
        os.close(fd)


def _run(argv: list[str], case: str, limit: int) -> dict:
    start = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            _set_up(case, limit)
            code = interrupted_main(argv)
        except BaseException:  # what a process would print (os._exit below would swallow it)
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    got = {out_r: b"", err_r: b""}
    selector = selectors.DefaultSelector()
    for fd in got:
        selector.register(fd, selectors.EVENT_READ)
    while selector.get_map():
        for key, _ in selector.select():
            chunk = os.read(key.fd, 65536)
            if chunk:
                got[key.fd] += chunk
            else:
                selector.unregister(key.fd)
                os.close(key.fd)
    _, status = os.waitpid(pid, 0)
    return {"returncode": os.waitstatus_to_exitcode(status), "stdout": got[out_r].decode(errors="replace"),
            "stderr": got[err_r].decode(errors="replace"), "seconds": round(time.monotonic() - start, 2)}  # fmt: skip


def _full_disk(disk: Path, size: str, seed: Path) -> None:
    disk.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], check=True)
    for f in seed.iterdir():
        shutil.copyfile(f, disk / f.name)
    room = os.statvfs(disk)
    with open(disk / "filler.bin", "wb") as f:
        f.write(b"\0" * max(0, (room.f_bavail - 1) * room.f_frsize))


def _hashes(disk: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(disk.iterdir())}


runs = json.loads(sys.stdin.read())
disk = None
if sys.argv[1:2] == ["--mount"]:
    disk = Path(sys.argv[2])
    _full_disk(disk, sys.argv[3], Path(sys.argv[4]))
results = []
for r in runs:
    os.chdir(r.get("cwd", os.getcwd()))  # a run's own folder (relative paths, what a command leaves in it)
    results.append(_run(r["argv"], r["case"], r.get("limit", 0)))
print(json.dumps({"runs": results, "disk": _hashes(disk) if disk is not None else {}}))
