"""The model list finds the GGUF files Ollama, LM Studio, GPT4All and the hub cache keep, under a fake
HOME, without reading them: the files here are not even GGUF (a read would fail on them), yet they are
listed, and each name resolves to its file."""

from __future__ import annotations

import json

import pytest

from models.config import InputError
from models.pretrained.registry import list_models, resolve_model


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return home


def _ollama(home, namespace, model, tag, digest, *, model_layer=True):
    root = home / ".ollama" / "models"
    manifest = root / "manifests" / "registry.ollama.ai" / namespace / model / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layers = [{"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:template"}]
    if model_layer:
        layers.append({"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"})
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    blob = root / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(b"not read")
    return blob


def _file(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not read")
    return path


def test_the_model_list_finds_every_tools_gguf_files(home, tmp_path):
    llama = _ollama(home, "library", "llama3.2", "1b", "ab12")
    custom = _ollama(home, "someone", "tiny", "latest", "cd34")
    _ollama(home, "library", "notext", "latest", "ef56", model_layer=False)  # no model layer: not listed
    studio = _file(home / ".lmstudio" / "models" / "bartowski" / "SmolLM2-GGUF" / "SmolLM2-Q4_K_M.gguf")
    old_studio = _file(home / ".cache" / "lm-studio" / "models" / "TheBloke" / "x-GGUF" / "x.Q8_0.gguf")
    gpt4all = _file(home / ".local" / "share" / "nomic.ai" / "GPT4All" / "orca-mini.gguf")
    _file(home / ".local" / "share" / "nomic.ai" / "GPT4All" / "notes.txt")  # not a .gguf: not listed
    snap = tmp_path / "hub" / "models--org--repo-GGUF" / "snapshots" / "abc"
    hub = _file(snap / "repo.Q4_0.gguf")
    (tmp_path / "hub" / "models--org--repo-GGUF" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--repo-GGUF" / "refs" / "main").write_text("abc")

    found = {e.name: e for e in list_models() if e.model_type == "gguf"}
    want = {
        "ollama/llama3.2:1b": (llama, "Ollama"),
        "ollama/someone/tiny:latest": (custom, "Ollama"),
        "lmstudio/bartowski/SmolLM2-GGUF/SmolLM2-Q4_K_M.gguf": (studio, "LM Studio"),
        "lmstudio/TheBloke/x-GGUF/x.Q8_0.gguf": (old_studio, "LM Studio"),
        "gpt4all/orca-mini.gguf": (gpt4all, "GPT4All"),
        "org/repo-GGUF/repo.Q4_0.gguf": (hub, "cache"),
    }
    assert {name: (e.path, e.source) for name, e in found.items()} == want
    for name, (path, _) in want.items():
        assert resolve_model(name) == path


def test_ollama_models_env_and_a_corrupt_manifest(home, tmp_path, monkeypatch):
    root = tmp_path / "elsewhere"
    monkeypatch.setenv("OLLAMA_MODELS", str(root))
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / "bad" / "latest"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{not json")
    good = root / "manifests" / "registry.ollama.ai" / "library" / "good" / "latest"
    good.parent.mkdir(parents=True)
    good.write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:1"}]}))
    _file(root / "blobs" / "sha256-1")
    names = [e.name for e in list_models() if e.model_type == "gguf"]
    assert names == ["ollama/good:latest"]
    with pytest.raises(InputError, match="no model 'ollama/bad:latest'"):
        resolve_model("ollama/bad:latest")
