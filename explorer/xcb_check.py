"""``make run``'s check before the window opens: the libraries Qt's xcb plugin (the X11 window
system) needs, read with ``ldd``, and the one ``apt install`` line that adds the missing ones.

On a fresh Debian 12 / Ubuntu desktop the window aborted with Qt's own message, which blames
``libxcb-cursor0`` (installed) while ``libxcb-icccm4`` and ``libxcb-keysyms1`` were missing.
``python -m explorer.xcb_check``: exit 0 when nothing is missing (or xcb is not the platform in use),
else 1 after printing the line. Never imports Qt (the plugin is found on disk).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)


def xcb_plugin() -> Path | None:
    """PySide6's ``libqxcb.so``, or None (not Linux, PySide6 elsewhere)."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    plugin = Path(next(iter(spec.submodule_search_locations))) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def missing_libraries(ldd_output: str) -> list[str]:
    """The sonames ``ldd`` could not find, each once, in order."""
    return list(dict.fromkeys(NOT_FOUND.findall(ldd_output)))


def debian_package(soname: str) -> str:
    """Debian's package for a library by its soname (the Debian policy's naming: ``libxcb-icccm.so.4``
    -> ``libxcb-icccm4``, ``libxkbcommon-x11.so.0`` -> ``libxkbcommon-x11-0``)."""
    name, _, version = soname.partition(".so.")
    version = version.split(".")[0]
    name = name.lower()
    return f"{name}-{version}" if name[-1:].isdigit() else f"{name}{version}"


def advice(missing: list[str]) -> str:
    packages = " ".join(dict.fromkeys(debian_package(m) for m in missing))
    return (f"Qt's X11 plugin (xcb) cannot load: {', '.join(missing)} not found. On Debian or Ubuntu:\n"
            f"  sudo apt install {packages}")  # fmt: skip


def check(environ=os.environ, run=subprocess.run) -> str:
    """'' when the window can open on X11 (or will not use it), else the advice."""
    platform = environ.get("QT_QPA_PLATFORM", "")
    if not sys.platform.startswith("linux") or (platform and not platform.startswith("xcb")):
        return ""
    plugin = xcb_plugin()
    if plugin is None or shutil.which("ldd") is None:
        return ""
    out = run(["ldd", str(plugin)], capture_output=True, text=True, check=False).stdout
    missing = missing_libraries(out)
    return advice(missing) if missing else ""


if __name__ == "__main__":
    message = check()
    if message:
        print(message, file=sys.stderr)
    sys.exit(1 if message else 0)
