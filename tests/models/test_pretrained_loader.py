"""Loading: file formats, bad folders and bad requests (one-line InputErrors), the model registry.

The tiny GPT-2 here is written directly with safetensors (no transformers), so these tests are
fast and also show the exact file layout the loader expects.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers

from models.config import InputError
from models.pretrained import list_models, load_model, resolve_model

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "."]
D, LAYERS, POSITIONS = 16, 2, 12


def gpt2_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g) * 0.3

    t = {"wte.weight": r(len(WORDS) + 1, D), "wpe.weight": r(POSITIONS, D)}
    t["ln_f.weight"], t["ln_f.bias"] = torch.ones(D), torch.zeros(D)
    for i in range(LAYERS):
        p = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            t[p + ln + ".weight"], t[p + ln + ".bias"] = torch.ones(D), r(D)
        for name, n_in, n_out in (
            ("attn.c_attn", D, 3 * D),
            ("attn.c_proj", D, D),
            ("mlp.c_fc", D, 4 * D),
            ("mlp.c_proj", 4 * D, D),
        ):
            t[p + name + ".weight"], t[p + name + ".bias"] = r(n_in, n_out), r(n_out)
    return t


def write_tiny_gpt2(folder: Path, **config) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {
        "model_type": "gpt2",
        "vocab_size": len(WORDS) + 1,
        "n_embd": D,
        "n_head": 2,
        "n_layer": LAYERS,
        "n_positions": POSITIONS,
    }
    cfg.update(config)
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file(gpt2_tensors(), str(folder / "model.safetensors"))
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_tiny_gpt2(tmp_path_factory.mktemp("tiny") / "tiny-gpt2")


@pytest.fixture(scope="module")
def tiny_model(tiny):
    return load_model(tiny, device="cpu")


@pytest.fixture
def copy(tiny, tmp_path):
    def make(name="model") -> Path:
        dst = tmp_path / name
        shutil.copytree(tiny, dst)
        return dst

    return make


def fails(match: str, fn, *args, **kwargs) -> str:
    with pytest.raises(InputError, match=match) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- the tiny model itself works ---------------------------------------------------------------
def test_tiny_loads_and_traces(tiny_model, tiny):
    assert tiny_model.name == "tiny-gpt2"
    trace = tiny_model.trace("the cat sat on the mat .", 1)
    assert trace.query_tokens == ("the", "cat", "sat", "on", "the", "mat", ".")
    assert trace["weights"].shape == (2, 7, 7)
    assert trace.config["path"] == str(tiny)


# --- bad folders -------------------------------------------------------------------------------
def test_no_config(copy):
    folder = copy()
    (folder / "config.json").unlink()
    fails("no config.json", load_model, folder)


def test_bad_config_json(copy):
    folder = copy()
    (folder / "config.json").write_text("{not json")
    fails("could not read", load_model, folder)


def test_no_weights(copy):
    folder = copy()
    (folder / "model.safetensors").unlink()
    fails("has no weights", load_model, folder)


def test_unsupported_model_type(copy):
    folder = copy()
    (folder / "config.json").write_text(json.dumps({"model_type": "whisper"}))
    message = fails("unsupported model_type 'whisper'", load_model, folder)
    assert "bert" in message and "gpt2" in message and "llama" in message


def test_truncated_safetensors(copy):
    folder = copy()
    path = folder / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    fails("truncated or corrupt", load_model, folder)


def test_garbage_safetensors(copy):
    folder = copy()
    (folder / "model.safetensors").write_bytes(b"\x00" * 3)
    fails("truncated or corrupt", load_model, folder)


def test_missing_tokenizer(copy):
    folder = copy()
    (folder / "tokenizer.json").unlink()
    fails("no tokenizer.json", load_model, folder)


def test_corrupt_tokenizer(copy):
    folder = copy()
    (folder / "tokenizer.json").write_text("{}")
    fails("could not read", load_model, folder)


def test_weights_do_not_match_config(copy):
    folder = copy()
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "n_embd": 32}))
    fails("has shape", load_model, folder)


def test_tokenizer_bigger_than_vocab(copy):
    folder = copy()
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "vocab_size": 5}))
    tensors = gpt2_tensors()
    tensors["wte.weight"] = tensors["wte.weight"][:5]
    save_file(tensors, str(folder / "model.safetensors"))
    model = load_model(folder, device="cpu")
    fails("do not match", model.trace, "the mat", 0)


class Exploit:
    """Unpickling this would create a marker file: weights_only loading must refuse it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_pickle_payload_is_never_run(copy, tmp_path):
    folder = copy()
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "pwned"
    torch.save({"wte.weight": Exploit(marker)}, folder / "pytorch_model.bin")
    fails("could not read pytorch_model.bin", load_model, folder)
    assert not marker.exists()


def test_bin_weights_load(copy, tiny_model):
    folder = copy()
    (folder / "model.safetensors").unlink()
    torch.save(
        {"transformer." + k: v for k, v in gpt2_tensors().items()}, folder / "pytorch_model.bin"
    )
    model = load_model(folder, device="cpu")
    a = model.trace("the cat sat", 1)["output"].array
    b = tiny_model.trace("the cat sat", 1)["output"].array
    assert (a == b).all()


def test_sharded_safetensors(copy, tiny_model):
    folder = copy()
    (folder / "model.safetensors").unlink()
    tensors = gpt2_tensors()
    names = sorted(tensors)
    shards = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    for file, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(folder / file))
    index = {"weight_map": {k: file for file, keys in shards.items() for k in keys}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    model = load_model(folder, device="cpu")
    a = model.trace("the cat sat", 1)["output"].array
    assert (a == tiny_model.trace("the cat sat", 1)["output"].array).all()
    (folder / "model-00002-of-00002.safetensors").unlink()
    fails("missing weights file", load_model, folder)


def test_half_precision_weights_become_float32(copy):
    folder = copy()
    save_file({k: v.half() for k, v in gpt2_tensors().items()}, str(folder / "model.safetensors"))
    trace = load_model(folder, device="cpu").trace("the cat", 0)
    assert trace["weights"].array.dtype == "float32" and trace.config["dtype"] == "float32"


# --- bad requests ------------------------------------------------------------------------------
@pytest.mark.parametrize("layer", [-1, LAYERS, 99])
def test_layer_out_of_range(tiny_model, layer):
    message = fails("out of range", tiny_model.trace, "the cat", layer)
    assert f"{LAYERS} layers" in message


def test_layer_not_an_integer(tiny_model):
    fails("integer", tiny_model.trace, "the cat", "1")
    fails("integer", tiny_model.trace, "the cat", 1.0)
    fails("integer", tiny_model.trace, "the cat", True)


@pytest.mark.parametrize("sentence", ["", "   ", "\n"])
def test_empty_sentence(tiny_model, sentence):
    fails("empty", tiny_model.trace, sentence, 0)


def test_bad_mask_and_pads(tiny_model):
    fails("unknown mask", tiny_model.trace, "the cat", 0, mask="diagonal")
    fails("outside", tiny_model.trace, "the cat", 0, mask="padding", pad_positions=(5,))
    fails("integers", tiny_model.trace, "the cat", 0, mask="padding", pad_positions=("x",))


def test_truncation_notice(tiny_model):
    trace = tiny_model.trace("the cat sat on the mat . " * 5, 0)
    assert len(trace.query_tokens) == POSITIONS
    (notice,) = trace.meta["notices"]
    assert "truncated" in notice and str(POSITIONS) in notice and "35" in notice


def test_device(tiny, monkeypatch):
    fails("unknown device", load_model, tiny, device="tpu")
    import models.engine.device

    monkeypatch.setattr(models.engine.device, "cuda_name", lambda: None)  # as on a machine without CUDA
    model = load_model(tiny, device="cuda")
    trace = model.trace("the cat", 0)
    assert trace.device == "cpu" and any("CUDA" in s for s in trace.meta["notices"])


def test_unknown_name(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    fails("no model 'surely-not-a-model'", resolve_model, "surely-not-a-model")
    fails("no model", load_model, "org/surely-not-a-model")
    fails("no model given", resolve_model, "  ")


# --- the Hugging Face cache --------------------------------------------------------------------
def fake_cache(root: Path, tiny: Path) -> Path:
    """A hub cache with org/tiny (complete gpt2), gpt2 (complete) and openai/whisper-tiny (unsupported)."""
    for repo, source in (("models--org--tiny", tiny), ("models--gpt2", tiny)):
        snap = root / repo / "snapshots" / "abc123"
        snap.mkdir(parents=True)
        for f in source.iterdir():
            (snap / f.name).symlink_to(f)
        (root / repo / "refs").mkdir()
        (root / repo / "refs" / "main").write_text("abc123")
    t5 = root / "models--openai--whisper-tiny" / "snapshots" / "def456"
    t5.mkdir(parents=True)
    (t5 / "config.json").write_text(json.dumps({"model_type": "whisper"}))
    (root / "datasets--org--data").mkdir()
    return root


def test_cache_listing(monkeypatch, tmp_path, tiny):
    hub = fake_cache(tmp_path / "hub", tiny)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    cached = {e.name: e for e in list_models() if e.source == "cache"}
    assert set(cached) == {"org/tiny", "gpt2"}
    assert cached["org/tiny"].model_type == "gpt2"
    assert cached["org/tiny"].path == hub / "models--org--tiny" / "snapshots" / "abc123"
    assert resolve_model("org/tiny") == cached["org/tiny"].path
    assert resolve_model("tiny") == cached["org/tiny"].path  # unique short name
    assert resolve_model("gpt2") == cached["gpt2"].path
    assert load_model("org/tiny", device="cpu").name == "org/tiny"
    assert load_model(cached["gpt2"].path, device="cpu").name == "gpt2"
    fails("unsupported model_type 'whisper'", load_model, "openai/whisper-tiny")


def test_hf_home(monkeypatch, tmp_path, tiny):
    fake_cache(tmp_path / "home" / "hub", tiny)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert "org/tiny" in [e.name for e in list_models()]


def test_folder_path_wins(tiny):
    assert resolve_model(str(tiny)) == tiny
    fails("is a file", resolve_model, str(tiny / "config.json"))


def test_a_progress_callback_can_abandon_a_load():
    # Regression: Cancelled raised from the progress callback while reading weights was reported
    # as a corrupt file (InputError), so a GUI could not abandon a stale load.
    from models.config import Cancelled
    from models.pretrained import load_model

    def give_up(fraction, message):
        if fraction > 0.1:
            raise Cancelled("stale")

    with pytest.raises(Cancelled):
        load_model("minilm", device="cpu", progress=give_up)
