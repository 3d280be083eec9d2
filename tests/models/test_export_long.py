"""Export at long sizes (issue 34): a stage too large for the disk is refused before anything is
written, with the size it would take; ``--rows A:B --cols C:D`` writes a region of every stage,
exactly; ``--text-file`` reads a long text as the sentence."""

from __future__ import annotations

import json
import shutil
from collections import namedtuple

import numpy as np
import pytest
import torch

from models.cli.export import export_main
from models.config import AttentionConfig, AttentionRequest
from models.engine import pairs
from models.engine.pipeline import run

SMALL = ["--heads", "2", "--d-model", "8", "--mask", "causal"]


def _words(n: int) -> str:
    return " ".join(f"w{i % 700}" for i in range(n))


def test_a_region_of_every_stage_is_written_exactly(tmp_path):
    sentence = _words(60)
    assert export_main(["--sentence", sentence, *SMALL, "--out", str(tmp_path / "all")]) == 0
    assert export_main(["--sentence", sentence, *SMALL, "--rows", "7:19", "--cols", "3:40",
                        "--out", str(tmp_path / "cut")]) == 0  # fmt: skip
    doc = json.loads((tmp_path / "cut" / "manifest.json").read_text())
    for entry in doc["stages"]:
        whole = np.load(tmp_path / "all" / entry["file"])
        cut = np.load(tmp_path / "cut" / entry["file"])
        rows = slice(None) if entry["axes"][-2] == "head" else slice(7, 19)
        cols = slice(3, 40) if entry["axes"][-1] == "key" else slice(None)
        np.testing.assert_array_equal(cut, whole[..., rows, cols], err_msg=entry["name"])
        assert entry["shape"] == list(cut.shape)


def test_a_region_of_a_long_store_equals_a_float64_softmax(tmp_path, monkeypatch):
    monkeypatch.setattr(pairs, "LONG_CELLS", 100)  # every store long: the weights from the rows' statistics
    sentence = _words(300)
    assert export_main(["--sentence", sentence, *SMALL, "--stages", "weights,q,k", "--rows", "250:260",
                        "--cols", "100:300", "--out", str(tmp_path / "cut")]) == 0  # fmt: skip
    got = np.load(tmp_path / "cut" / "weights.npy")
    trace = run(AttentionRequest(config=AttentionConfig(heads=2, d_model=8, mask="causal"), sentence=sentence))
    assert trace["weights"].store.long is not None
    q, k = (torch.from_numpy(trace[s].array).double() for s in ("q", "k"))
    x = q[:, 250:260] @ k.transpose(1, 2) / 2.0  # d_k = 4
    x = x.masked_fill(torch.ones(300, 300, dtype=torch.bool).triu(1)[250:260], float("-inf"))
    want = torch.softmax(x, dim=-1)[..., 100:300].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)


def test_an_export_larger_than_the_disk_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(1 << 40, 0, 10 << 30))  # 10 GiB free
    text = tmp_path / "long.txt"
    text.write_text(_words(131072))
    out = tmp_path / "out"
    code = export_main(["--text-file", str(text), "--heads", "1", "--d-model", "4", "--mask", "causal",
                        "--stages", "weights", "--out", str(out)])  # fmt: skip
    assert code == 2 and not out.exists() and list(tmp_path.iterdir()) == [text]
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: this export would take 64.0 GiB (weights 64.0 GiB)") and "\n" not in err
    assert "of these 131,072 rows would fit (e.g. --rows 0:" in err  # which region fits (issue 50, item 11)
    # a region of it is exact and small
    assert export_main(["--text-file", str(text), "--heads", "1", "--d-model", "4", "--mask", "causal",
                        "--stages", "weights", "--rows", "131000:131010", "--cols", "0:131072",
                        "--out", str(out)]) == 0  # fmt: skip
    rows = np.load(out / "weights.npy")
    assert rows.shape == (1, 10, 131072)
    np.testing.assert_allclose(rows.sum(axis=-1), 1.0, rtol=1e-5)
    assert not rows[0, 0, 131001:].any()  # causal: exactly 0 after the query


@pytest.mark.parametrize("content, message", [(b"\xff\xfe bad", "is not UTF-8"), (b"  \n ", "holds no words")])
def test_a_bad_text_file_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "t.txt"
    path.write_bytes(content)
    assert export_main(["--text-file", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_text_file_and_sentence_together_are_refused(tmp_path, capsys):
    path = tmp_path / "t.txt"
    path.write_text("a b c")
    assert export_main(["--text-file", str(path), "--sentence", "x", "--out", str(tmp_path / "o")]) == 2
    assert "not both" in capsys.readouterr().err


def test_explain_a_cell_at_row_32000_reads_its_row_only_and_is_exact():
    """``explain`` of a weight of a long input: one row computed (never the 32,768² map), its value
    equal to a float64 softmax of the same row, its summands adding up to it."""
    from models.reads.explain import explain
    from models.reads.params import toy_params

    req = AttentionRequest(config=AttentionConfig(heads=1, d_model=4, mask="causal", max_tokens=1 << 17),
                           sentence=_words(32768))  # fmt: skip
    trace = run(req)
    store = trace["weights"].store
    assert store.long is not None
    d = explain(trace, toy_params(req), "weights", (0, 32000, 5))
    q, k = (torch.from_numpy(trace[s].array[0]).double() for s in ("q", "k"))
    x = (q[32000] @ k[:32001].T) / 2.0  # d_k = 4
    want = float(torch.softmax(x, dim=0)[5])
    assert d.value == pytest.approx(want, rel=1e-5)
    assert int(store.long.known.sum()) <= store.block_rows  # the statistics of one block of rows, no more
