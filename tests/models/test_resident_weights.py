"""Weights that stay (issue 45): the layer budget comes from the device's memory; a model that fits is
resident after its first pass (no checkpoint read per generated token); one that does not keeps a
pinned prefix of layers and reads only the others on each pass, never evicting what it needs next.

Reads are counted at the one function that reads a tensor from the file (``Checkpoint.read``)."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch

from models import memory
from models.config import InputError
from models.generate import GenerateSettings, generate
from models.pretrained import load_model, loader
from models.pretrained.checkpoint import Checkpoint
from models.pretrained.layer_store import LayerStore, Residency

transformers = pytest.importorskip("transformers")
from tests.models.test_pretrained_families import make_tokenizer  # noqa: E402

LAYERS = 4
PROMPT = "the cat sat on the mat"
TOKENS = 5


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """(folder, transformers' model): a random LLaMA made with ``from_config`` and saved."""
    torch.manual_seed(0)
    tok = make_tokenizer(encoder=False)
    config = transformers.LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=64, initializer_range=0.2, eos_token_id=None)  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    folder = tmp_path_factory.mktemp("llama")
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return folder, model


@pytest.fixture
def big(monkeypatch):
    monkeypatch.setattr(loader, "PRELOAD_FILE_BYTES", 0)  # read layer by layer, as a big checkpoint is


@pytest.fixture
def reads(monkeypatch):
    """``reads[0]``: tensors read from a checkpoint file so far."""
    count = [0]
    read = Checkpoint.read

    def counted(self, key):
        count[0] += 1
        return read(self, key)

    monkeypatch.setattr(Checkpoint, "read", counted)
    return count


def reads_per_token(model, reads) -> tuple[list[int], list[int], list[int]]:
    """(tensors read, layers read) during each generated token after the first, and the ids."""
    marks = []
    gen = generate(model, PROMPT, GenerateSettings(max_new_tokens=TOKENS),
                   on_step=lambda done, total: marks.append((reads[0], model.arch.layers.reads)))  # fmt: skip
    steps = list(zip(marks, marks[1:]))
    assert len(steps) == TOKENS - 1
    return [b[0] - a[0] for a, b in steps], [b[1] - a[1] for a, b in steps], gen


def test_a_model_that_fits_reads_nothing_per_generated_token(llama, big, reads, device):
    folder, ref = llama
    model = load_model(folder, device=device)
    assert model.arch.layers.budget > 0  # from the memory the machine has
    tensors, layers, gen = reads_per_token(model, reads)
    assert tensors == [0] * (TOKENS - 1) and layers == [0] * (TOKENS - 1)
    assert model.arch.layers.reads == LAYERS  # each layer read once, on the first pass
    assert gen.weights.startswith("weights resident, ")
    ids = torch.tensor([gen.ids[: gen.prompt_length]])
    with torch.no_grad():
        theirs = ref.generate(ids, max_new_tokens=TOKENS, do_sample=False)[0].tolist()
    assert gen.ids == theirs  # the same tokens as transformers


@pytest.mark.parametrize("resident", [0, 2])
def test_a_model_beyond_the_budget_reads_only_the_layers_that_do_not_fit(llama, big, reads, monkeypatch, resident,
                                                                         device):  # fmt: skip
    folder, _ = llama
    probe = load_model(folder, device=device).arch.layers
    sizes = [probe.held_bytes(i) for i in range(LAYERS)]
    monkeypatch.setenv(memory.LAYER_BUDGET_ENV, str(sum(sizes[:resident])))  # the first `resident` layers fit
    model = load_model(folder, device=device)
    store = model.arch.layers
    tensors, layers, gen = reads_per_token(model, reads)
    per_layer = len([k for k in store.weights.ckpt.keys if k.startswith("model.layers.1.")])
    assert layers == [LAYERS - resident] * (TOKENS - 1)  # not every layer: the prefix stays
    assert tensors == [(LAYERS - resident) * per_layer] * (TOKENS - 1)
    assert [store.cached(i) for i in range(resident)] == [True] * resident
    assert store.residency() == Residency(LAYERS, resident, sum(sizes[:resident]))
    assert gen.weights.startswith(f"{LAYERS - resident} of {LAYERS} layers read from disk per token")
    whole = generate(load_model(folder, device=device), PROMPT, GenerateSettings(max_new_tokens=TOKENS))
    assert gen.ids == whole.ids


def test_a_cyclic_visit_keeps_the_prefix_and_reads_the_rest_each_pass():
    """The store alone: layers of 10 bytes, a budget of 25 pins layers 0 and 1; three passes over 5
    layers read 2 + 3 × 3 layers (least recently used eviction read all 15)."""

    weights = SimpleNamespace(device=torch.device("cpu"), ckpt=SimpleNamespace(reading=nullcontext),
                              as_meta=lambda: SimpleNamespace(taken=[10], held=[10]))  # every layer: 10 bytes
    store = LayerStore(lambda i, w: {"i": i}, 5, weights, budget=25)
    for _ in range(3):
        for i in range(5):
            assert store[i]["i"] == i
            store[i]  # asked again within the layer's own step: no read
    assert store.reads == 2 + 3 * 3
    assert store.residency() == Residency(5, 2, 20) and store.residency().per_pass == 3
    store.budget = 10  # a smaller budget lets go of what no longer fits
    assert store.cached(0) and not store.cached(1)
    assert Residency(5, 4, 40).per_pass == 0  # a single layer beyond stays in the store's slot


def test_the_budget_is_the_devices_free_memory_less_a_margin(monkeypatch):
    monkeypatch.delenv(memory.LAYER_BUDGET_ENV, raising=False)
    monkeypatch.setattr(memory, "available_bytes", lambda: memory.LAYER_RESERVE + (4 << 30))
    assert memory.layer_budget(torch.device("cpu")) == int((4 << 30) * memory.LAYER_SHARE)
    monkeypatch.setattr(memory, "available_bytes", lambda: memory.LAYER_RESERVE // 2)
    assert memory.layer_budget("cpu") == memory.LAYER_FLOOR  # little to spare: a small model still stays
    monkeypatch.setenv(memory.LAYER_BUDGET_ENV, "12345")
    assert memory.layer_budget("cpu") == 12345


@pytest.mark.parametrize("value", ["lots", "-1", "nan"])
def test_a_malformed_forced_budget_is_one_line(monkeypatch, value):
    monkeypatch.setenv(memory.LAYER_BUDGET_ENV, value)
    with pytest.raises(InputError, match=f"^{memory.LAYER_BUDGET_ENV} must be a number of bytes") as info:
        memory.layer_budget("cpu")
    assert "\n" not in str(info.value)


def test_on_cuda_the_budget_is_the_cards_free_memory(monkeypatch):
    """torch.cuda.mem_get_info's free bytes, not the host's (asked of torch: runs without a card)."""
    monkeypatch.delenv(memory.LAYER_BUDGET_ENV, raising=False)
    asked = []
    free = memory.LAYER_RESERVE + (4 << 30)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: asked.append(d) or (free, 1 << 40))
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 40)  # the host's: not what counts
    assert memory.layer_budget(torch.device("cuda", 0)) == int((4 << 30) * memory.LAYER_SHARE)
    assert asked == [torch.device("cuda", 0)]
