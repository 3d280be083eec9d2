"""Where the tools people run models with keep their GGUF files, found without reading any of them.

- Ollama: ``$OLLAMA_MODELS`` or ``~/.ollama/models``: ``manifests/<host>/<namespace>/<model>/<tag>`` are
  small JSON files whose layer of media type ``application/vnd.ollama.image.model`` names the GGUF blob
  (``blobs/sha256-<hex>``) by its digest; listed as ``ollama/<model>:<tag>`` (the namespace kept unless it
  is ``library``);
- LM Studio: ``~/.lmstudio/models`` and ``~/.cache/lm-studio/models`` (``<publisher>/<repo>/<file>.gguf``),
  listed as ``lmstudio/<publisher>/<repo>/<file>.gguf``;
- GPT4All: ``~/.local/share/nomic.ai/GPT4All/<file>.gguf``, listed as ``gpt4all/<file>.gguf``;
- the Hugging Face cache: a snapshot's ``*.gguf`` files, listed as ``<org>/<name>/<file>.gguf``.

Only folder listings and Ollama's manifests are read; a GGUF file is opened when it is chosen.
Torch-free, like registry.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

OLLAMA_MODEL = "application/vnd.ollama.image.model"
MAX_MANIFEST_BYTES = 1 << 20
MAX_FOUND = 500  # a huge tree is not walked without end


def _gguf_in(folder: Path, depth: int) -> list[Path]:
    """``*.gguf`` files under ``folder``, at most ``depth`` folders down, by name."""
    found: list[Path] = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return found
    for entry in entries:
        if len(found) >= MAX_FOUND:
            break
        try:
            if entry.is_file() and entry.suffix.lower() == ".gguf":
                found.append(entry)
            elif depth > 0 and entry.is_dir():
                found.extend(_gguf_in(entry, depth - 1))
        except OSError:
            continue
    return found


def ollama_root() -> Path:
    env = os.environ.get("OLLAMA_MODELS")
    return Path(env).expanduser() if env else Path.home() / ".ollama" / "models"


def ollama_models() -> dict[str, Path]:
    """``{"ollama/llama3.2:1b": blob}`` for each manifest whose model blob exists."""
    root = ollama_root()
    manifests = root / "manifests"
    found: dict[str, Path] = {}
    try:
        files = sorted(p for p in manifests.rglob("*") if p.is_file())
    except OSError:
        return found
    for path in files[:MAX_FOUND]:
        parts = path.relative_to(manifests).parts  # host, namespace, model, tag
        if len(parts) != 4:
            continue
        _, namespace, model, tag = parts
        try:
            if path.stat().st_size > MAX_MANIFEST_BYTES:
                continue
            manifest = json.loads(path.read_text(encoding="utf-8"))
            layers = manifest.get("layers", [])
            digests = [layer["digest"] for layer in layers if layer.get("mediaType") == OLLAMA_MODEL]
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
        if len(digests) != 1 or not isinstance(digests[0], str):
            continue
        blob = root / "blobs" / digests[0].replace(":", "-")
        if blob.is_file():
            name = f"{model}:{tag}" if namespace == "library" else f"{namespace}/{model}:{tag}"
            found[f"ollama/{name}"] = blob
    return found


def gguf_models(hub_snapshots: dict[str, Path]) -> dict[str, Path]:
    """Every GGUF file the tools keep: ``{name: path}`` (names as the module's docstring lists them)."""
    found = dict(ollama_models())
    home = Path.home()
    for root in (home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"):
        for path in _gguf_in(root, 2):
            found.setdefault("lmstudio/" + path.relative_to(root).as_posix(), path)
    gpt4all = home / ".local" / "share" / "nomic.ai" / "GPT4All"
    for path in _gguf_in(gpt4all, 0):
        found[f"gpt4all/{path.name}"] = path
    for repo, snapshot in hub_snapshots.items():
        for path in _gguf_in(snapshot, 1):
            found[f"{repo}/{path.relative_to(snapshot).as_posix()}"] = path
    return found
