"""A bad GGUF file is one `error:` line and exit status 2, nothing written: empty, not GGUF, its header or
its tensor data cut short, a tokenizer the explorer cannot build, a mixture of experts."""

from __future__ import annotations

import pytest
from generate_refs import make_tokenizer
from gguf_refs import _tokenizer_metadata, write_gguf

from main import main

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    import torch

    torch.manual_seed(0)
    tok = make_tokenizer()
    config = transformers.LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    path = tmp_path_factory.mktemp("gguf") / "good.gguf"
    write_gguf(path, model, "llama", tok.to_str())
    return path


def _refused(capsys, tmp_path, path, message):
    out = tmp_path / "out"
    assert main(["export", "--model", str(path), "--sentence", "the cat", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not out.exists()


def test_the_good_file_opens(good, tmp_path, capsys):
    assert main(["export", "--model", str(good), "--sentence", "the cat", "--out", str(tmp_path / "out")]) == 0


def test_bad_gguf_files_are_one_line(good, tmp_path, capsys):
    data = good.read_bytes()
    cases = {
        "empty.gguf": (b"", "could not read empty.gguf"),
        "text.gguf": (b"hello, not a model at all", "text.gguf is not a GGUF file"),
        "header.gguf": (data[:200], "truncated or corrupt GGUF file?"),
        "data.gguf": (data[:-100], "runs past the end of the file"),
        "version.gguf": (data[:4] + b"\x09\x00\x00\x00" + data[8:], "GGUF version 9"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        _refused(capsys, tmp_path, path, message)


def test_a_tokenizer_kind_not_built_is_refused_by_name(good, tmp_path, capsys):
    data = good.read_bytes()
    key = b"tokenizer.ggml.model"
    at = data.index(key) + len(key) + 4 + 8  # the value's type, then its length, then "gpt2"
    assert data[at : at + 4] == b"gpt2"
    path = tmp_path / "rwkv.gguf"
    path.write_bytes(data[:at] + b"rwkv" + data[at + 4 :])  # RWKV's world tokenizer: as long as "gpt2"
    _refused(capsys, tmp_path, path, "GGUF tokenizer 'rwkv' is not supported; supported: gpt2 (byte-level BPE), llama")


def test_a_mixture_of_experts_file_is_refused_by_name(tmp_path, capsys):
    """Mixtral is stored under the "llama" architecture, its experts stacked (blk.N.ffn_gate_exps)."""
    import gguf
    import numpy as np

    path = tmp_path / "mixtral.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_expert_count(8)
    w.add_expert_used_count(2)
    for add, value in (("context_length", 64), ("embedding_length", 8), ("feed_forward_length", 16),
                       ("head_count", 2), ("head_count_kv", 2)):  # fmt: skip
        getattr(w, f"add_{add}")(value)
    w.add_layer_norm_rms_eps(1e-6)
    _tokenizer_metadata(w, make_tokenizer().to_str(), add_bos=True)
    w.add_tensor("token_embd.weight", np.zeros((make_tokenizer().get_vocab_size(), 8), dtype=np.float32))
    w.add_tensor("blk.0.ffn_gate_exps.weight", np.zeros((8, 16, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    _refused(capsys, tmp_path, path, "a mixture-of-experts GGUF file (llama, 8 experts) is not supported")
