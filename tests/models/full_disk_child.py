"""Run one command on a small, nearly full disk of its own, for the full-disk tests.

``unshare -rm python full_disk_child.py DISK SIZE USER_FILE -- ARGS...`` (a private mount
namespace: the tmpfs is gone when the child ends): mounts a tmpfs of SIZE on DISK, copies
USER_FILE into it (the user's own file, which fills most of it), runs ``ARGS`` (a command that
writes into DISK) as a grandchild, and prints one JSON line: its exit code, stdout and stderr,
what DISK holds afterwards, and whether the user's file is byte for byte as it was."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

disk, size, user = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
argv = sys.argv[sys.argv.index("--") + 1 :]
disk.mkdir(parents=True, exist_ok=True)
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], check=True)
shutil.copyfile(user, disk / user.name)
result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
print(json.dumps({
    "returncode": result.returncode,
    "stdout": result.stdout,
    "stderr": result.stderr,
    "left": sorted(p.name for p in disk.iterdir()),
    "user_same": (disk / user.name).read_bytes() == user.read_bytes(),
}))
