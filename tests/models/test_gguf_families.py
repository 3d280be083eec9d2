"""A small random GGUF file of every registry family that GGUF stores and transformers reads back, opened
here and by transformers (``gguf_file=``): the same token ids, greedy generation, every layer's attention
and the logit lens. Every other family of the registry, written as a GGUF file, is refused by name."""

from __future__ import annotations

import gguf
import gguf.quants
import numpy as np
import pytest
import torch
from generate_refs import PROMPT, lens_logits, make_tokenizer
from gguf_refs import GGUF_ARCH, OTHER_ARCH, write_gguf, write_other
from zoo import ZOO

from models.api import load
from models.config import InputError
from models.generate import GenerateSettings, generate, load_head
from models.pretrained import load_model
from models.pretrained.gguf_config import CONFIG_KEYS
from models.pretrained.gguf_read import GGUFFile
from models.pretrained.registry import SUPPORTED_TYPES

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

NEW = 6
OPENED = sorted({model_type for model_type, _ in CONFIG_KEYS.values()})
AS_LLAMA = ("mistral",)  # llama.cpp writes Mistral as "llama" (gguf has no "mistral" architecture): opened as llama
FIRST = {}
for _name, _case in ZOO.items():
    FIRST.setdefault(_case.family, _name)


def test_the_families_opened_are_the_registry_s_that_transformers_reads_from_gguf():
    assert set(OPENED) <= set(SUPPORTED_TYPES)
    assert set(OPENED) == set(GGUF_ARCH)
    assert all(t in FIRST for t in OPENED)


def _random(model_type: str):
    _, cls_name, kwargs, _ = ZOO[FIRST[model_type]]
    kwargs = dict(kwargs, max_position_embeddings=max(40, kwargs.get("max_position_embeddings", 40)))
    if model_type == "gpt2":  # transformers' GGUF config leaves n_positions at its default
        kwargs = dict(kwargs, n_positions=1024)
        kwargs.pop("max_position_embeddings")
    if model_type == "qwen3":  # a qwen3 GGUF states no head size: the default one
        kwargs.pop("head_dim", None)
    if model_type == "falcon":  # transformers reads a falcon GGUF as Falcon-7B: multi-query, parallel attention
        kwargs = {k: v for k, v in kwargs.items() if k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                             "max_position_embeddings", "initializer_range")}
    if model_type == "stablelm":  # transformers reads no rotary share nor qk-norm from a stablelm GGUF
        kwargs = {k: v for k, v in kwargs.items() if k not in ("qk_layernorm", "partial_rotary_factor")}
    torch.manual_seed(0)
    tok = make_tokenizer()
    config = getattr(transformers, cls_name)(vocab_size=tok.get_vocab_size(), **kwargs)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 1:
                param.add_(0.1 * torch.randn_like(param))
    return model, tok


@pytest.fixture(scope="module", params=OPENED)
def family(request, tmp_path_factory):
    model_type = request.param
    folder = tmp_path_factory.mktemp(f"gguf-{model_type}")
    model, tok = _random(model_type)
    path = folder / "model.gguf"
    write_gguf(path, model, model_type, tok.to_str())
    ref = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=path.name,
                                                            attn_implementation="eager").eval()  # fmt: skip
    ref_tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=path.name)
    ours = load_model(path, device="cpu")
    gen = generate(ours, PROMPT, GenerateSettings(max_new_tokens=NEW))
    return model_type, path, ref, ref_tok, ours, gen


def test_the_config_and_tokens_are_transformers(family):
    model_type, _, ref, ref_tok, ours, gen = family
    assert ours.model_type == ref.config.model_type == model_type
    assert (ours.num_layers, ours.num_heads) == (ref.config.num_hidden_layers if model_type != "gpt2"
                                                 else ref.config.n_layer, ref.config.num_attention_heads)  # fmt: skip
    assert list(gen.ids[: gen.prompt_length]) == ref_tok(PROMPT).input_ids
    for text in ("hello world, the cats", "  two  spaces", "<s>x</s>"):
        assert list(ours.tokenizer.encode(text, 100).ids) == ref_tok(text).input_ids


def test_greedy_generation_and_attention_equal_transformers(family):
    _, _, ref, _, ours, gen = family
    prompt = torch.tensor([gen.ids[: gen.prompt_length]])
    with torch.no_grad():
        out = ref.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=NEW,
                           pad_token_id=0, eos_token_id=None)  # fmt: skip
        forward = ref(torch.tensor([gen.ids]), output_attentions=True, output_hidden_states=True)
    assert gen.ids[: len(out[0])] == out[0].tolist()[: len(gen.ids)]
    theirs = np.stack([a[0].numpy() for a in forward.attentions])
    np.testing.assert_allclose(gen.attention(), theirs, atol=1e-5, rtol=0)
    L, n = ours.num_layers, gen.n
    with torch.no_grad():
        lens = [torch.softmax(lens_logits(ref, forward.hidden_states[i + 1][0]), -1).numpy() for i in range(L - 1)]
    nxt = gen.ids[1:]
    for layer in range(L - 1):
        np.testing.assert_allclose(gen.lens_prob[layer][: n - 1], lens[layer][np.arange(n - 1), nxt], atol=1e-5)


def test_a_traced_layer_s_stages_equal_transformers(family):
    _, path, ref, _, ours, gen = family
    trace = load(path, device="cpu").trace(PROMPT, layer=1)
    ids = torch.tensor([gen.ids[: gen.prompt_length]])
    with torch.no_grad():
        forward = ref(ids, output_attentions=True)
    np.testing.assert_allclose(trace.stage("weights"), forward.attentions[1][0].numpy(), atol=1e-5, rtol=0)


def test_a_trace_dequantizes_only_the_rows_of_its_tokens(family, monkeypatch):
    """Loading the file and tracing a few tokens dequantizes the token embedding table's rows of those
    tokens, nothing else of it (nor of an output matrix): counted at gguf's own dequantize."""
    _, path, _, _, _, gen = family
    whole_reads, row_reads, dequantized = [], [], []
    read, read_rows, dequantize = GGUFFile.read, GGUFFile.read_rows, gguf.quants.dequantize

    def counted(data, qtype):
        dequantized.append(np.asarray(data).nbytes)
        return dequantize(data, qtype)

    monkeypatch.setattr(gguf.quants, "dequantize", counted)
    monkeypatch.setattr(GGUFFile, "read", lambda f, name, data=None: whole_reads.append(name) or read(f, name, data))
    monkeypatch.setattr(GGUFFile, "read_rows", lambda f, name, rows, data=None: row_reads.append(
        (name, list(np.asarray(rows).tolist()))) or read_rows(f, name, rows, data))  # fmt: skip
    load(path, device="cpu").trace(PROMPT, layer=0)
    f = GGUFFile(path)
    ids = list(gen.ids[: gen.prompt_length])
    assert row_reads == [("token_embd.weight", ids)]
    assert not {"token_embd.weight", "output.weight"} & set(whole_reads)
    table = f.tensors["token_embd.weight"]
    assert sum(dequantized) == sum(f.tensors[n].nbytes for n in whole_reads) + table.nbytes // table.shape[0] * len(ids)


def test_a_head_read_by_blocks_of_rows_equals_the_whole_one(family):
    """With no layer budget the head is never dequantized whole (blocks of rows each step): the same logits
    to 1e-6 relative, the same greedy ids and lens."""
    _, path, _, _, ours, gen = family
    streamed = load_model(path, device="cpu")
    streamed.arch.layers.budget = 0
    kept, blocks = load_head(ours), load_head(streamed)
    assert isinstance(kept.weight, torch.Tensor) and not isinstance(blocks.weight, torch.Tensor)
    x = torch.randn(7, ours.hidden_size, generator=torch.Generator().manual_seed(0))
    want = kept.logits(x)
    np.testing.assert_allclose(blocks.logits(x), want, rtol=0, atol=1e-6 * float(want.abs().max()))
    again = generate(streamed, PROMPT, GenerateSettings(max_new_tokens=NEW))
    assert again.ids == gen.ids
    np.testing.assert_allclose(again.lens_prob, gen.lens_prob, atol=1e-6)


@pytest.mark.parametrize("model_type", [t for t in SUPPORTED_TYPES if t not in OPENED + list(AS_LLAMA)])
def test_every_other_family_is_refused_by_name(tmp_path, model_type):
    arch = OTHER_ARCH.get(model_type, model_type)
    path = tmp_path / f"{model_type}.gguf"
    write_other(path, arch)
    with pytest.raises(InputError, match=f"GGUF architecture '{arch}' is not supported; supported: llama"):
        load_model(path, device="cpu")
