"""Run ``main.py`` under an address-space limit a little above what its imports take, for the
memory-cap tests.

``python capped_child.py HEADROOM -- ARGS...``: imports what the command (or the window) imports,
then lowers RLIMIT_AS to the address space in use plus HEADROOM bytes, then runs
``main.py ARGS...``. Python, torch (and Qt) have started; whatever the job needs beyond HEADROOM
is refused by the memory check, or runs out (a ``MemoryError``, torch's allocator error)."""

import importlib
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from main import COMMANDS, interrupted_main  # noqa: E402

headroom = int(sys.argv[1])
argv = sys.argv[sys.argv.index("--") + 1 :]
import torch  # noqa: E402, F401

import models.pretrained  # noqa: E402, F401

if argv[:1] and argv[0] in COMMANDS:
    importlib.import_module(COMMANDS[argv[0]][0])
else:
    importlib.import_module("explorer.app")
with open("/proc/self/status", encoding="ascii") as status:
    used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (used + headroom, resource.getrlimit(resource.RLIMIT_AS)[1]))
sys.exit(interrupted_main(argv))
