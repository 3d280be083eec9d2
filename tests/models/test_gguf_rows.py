"""Rows of a quantized GGUF matrix (a token embedding lookup) are dequantized alone: only their bytes reach
gguf's ``dequantize`` (counted here), and their values equal the same rows of the whole dequantized matrix,
for every quantization type a file of the tests holds: Q4_0, Q5_0, Q8_0 and F32 written here, Q4_K and Q6_K
in Gemma 3's file."""

from __future__ import annotations

import gguf
import gguf.quants
import numpy as np
import pytest
from real_models import gemma3

from models.config import InputError
from models.pretrained.gguf_read import GGUFFile

ROWS = [5, 0, 5, 63]  # out of order, repeated, the last


@pytest.fixture
def counted(monkeypatch):
    seen: list[int] = []
    whole = gguf.quants.dequantize

    def dequantize(data, qtype):
        seen.append(int(np.asarray(data).nbytes))
        return whole(data, qtype)

    monkeypatch.setattr(gguf.quants, "dequantize", dequantize)
    return seen


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    path = tmp_path_factory.mktemp("rows") / "rows.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    rng = np.random.default_rng(0)
    for kind in ("Q4_0", "Q5_0", "Q8_0"):
        qtype = getattr(gguf.GGMLQuantizationType, kind)
        w.add_tensor(kind, gguf.quants.quantize(rng.standard_normal((64, 256)).astype(np.float32), qtype),
                     raw_dtype=qtype)  # fmt: skip
    w.add_tensor("F32", rng.standard_normal((64, 256)).astype(np.float32))
    w.add_tensor("bias", np.zeros(8, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return GGUFFile(path)


@pytest.mark.parametrize("name", ["Q4_0", "Q5_0", "Q8_0", "F32"])
def test_rows_equal_the_whole_matrix_s_and_only_they_are_dequantized(written, name, counted):
    whole = written.read(name)
    assert counted == [written.tensors[name].nbytes]
    counted.clear()
    rows = written.read_rows(name, ROWS)
    np.testing.assert_array_equal(rows, whole[ROWS])
    assert counted == [written.tensors[name].nbytes // 64 * len(ROWS)]  # 4 of 64 rows' bytes


def test_k_quant_rows_of_a_real_file(counted):
    f = GGUFFile(gemma3())
    for name in ("blk.0.attn_output.weight", "blk.0.ffn_down.weight", "token_embd.weight"):
        kind = f.type_name(name)
        n_rows = f.tensors[name].shape[0]
        rows = [0, 7, n_rows - 1]
        counted.clear()
        got = f.read_rows(name, rows)
        assert counted == [f.tensors[name].nbytes // n_rows * 3], kind
        if name != "token_embd.weight":  # the 262,144-row table is never dequantized whole
            np.testing.assert_array_equal(got, f.read(name)[rows])
    assert {f.type_name(n) for n in ("blk.0.attn_output.weight", "blk.0.ffn_down.weight")} == {"Q4_K", "Q6_K"}


def test_bad_rows_are_one_line(written):
    with pytest.raises(InputError, match="a row outside"):
        written.read_rows("Q8_0", [64])
    with pytest.raises(InputError, match="not a matrix"):
        written.read_rows("bias", [0])
