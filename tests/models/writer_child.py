"""Run ``main.py`` in a child process that pauses inside a writer, for the signal tests.

``python writer_child.py SUFFIX -- ARGS...``: like ``python main.py ARGS...``, except that the
first write whose temporary ends with SUFFIX prints ``PAUSED <temporary>`` on stdout, then waits
(for the parent's signal) just before the data is synced: the temporary is there, half done.
"""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import models.io.atomic as atomic  # noqa: E402

suffix = sys.argv[1]
argv = sys.argv[sys.argv.index("--") + 1 :]
paused = []


def _pause(where: str) -> None:
    if not paused and where.endswith(suffix):
        paused.append(where)
        print(f"PAUSED {where}", flush=True)
        # Short sleeps, not one long one: the kernel may hand the parent's signal to another
        # thread (torch's, say), and then a long sleep in the main thread is not interrupted and
        # Python runs its handler only when the sleep ends (a CI run timed out so, once in 1,266).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.05)


_sync, _sync_folder = atomic.sync_file, atomic.sync_folder


def sync(f):
    _pause(os.path.realpath(f"/proc/self/fd/{f.fileno()}") if os.path.exists("/proc/self/fd") else f.name)
    _sync(f)


def sync_folder(folder):
    _pause(str(folder) + "/")
    _sync_folder(folder)


atomic.sync_file, atomic.sync_folder = sync, sync_folder

from main import interrupted_main  # noqa: E402

sys.exit(interrupted_main(argv))
