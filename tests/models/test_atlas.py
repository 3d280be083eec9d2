"""``main.py atlas``: every head's metric means and sample standard deviations over a corpus equal
those computed here from transformers' own attentions, text by text, each text alone with the
tokenizer's own special tokens (MiniLM, a random GPT-2); the files are written all at once, bad
input is one line and exit status 2, an interruption writes nothing."""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest
import torch

from main import main
from models.files.run_files import spec_from_args
from models.pretrained import load_model, resolve_model
from models.reads.atlas import COLUMNS, read_atlas
from models.reads.detectors import DETECTORS, detect
from models.reads.survey import METRIC_NAMES

transformers = pytest.importorskip("transformers")
from test_survey import build, formula_metrics  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

TEXTS = ["the cat sat on the mat", "a dog is walking in the park", "", "hello world, the cats and dogs",
         "   ", "the park was green and the dogs ran", "cats", "a dog and a cat and a bird"]  # fmt: skip


def expected(folder, ref, texts) -> dict[str, np.ndarray]:
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()  # MiniLM's tokenizer.json pads to 128: each text is run alone, at its own length
    tok.no_truncation()
    per_text = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=True).ids
        with torch.no_grad():
            att = ref(torch.tensor([ids]), output_attentions=True).attentions
        per_text.append({m: np.array([[formula_metrics(a[0, h].numpy())[m] for h in range(a.shape[1])]
                                      for a in att]) for m in METRIC_NAMES})  # fmt: skip
    out = {}
    for m in METRIC_NAMES:
        stack = np.stack([t[m] for t in per_text])  # (texts, L, h)
        out[f"{m}_mean"] = np.nanmean(stack, axis=0)
        with np.errstate(invalid="ignore"):
            out[f"{m}_sd"] = np.nanstd(stack, axis=0, ddof=1)
    return out


def run_atlas(tmp_path, model, lines, *extra) -> tuple:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "atlas"
    assert main(["atlas", "--model", str(model), "--corpus", str(corpus), "--out", str(out), "--quiet", *extra]) == 0
    return corpus, out


def check_columns(out, want, texts: int) -> None:
    with open(out / "heads.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == COLUMNS and rows[1][:3] == ["0", "0", str(texts)]
    atlas = read_atlas(out)
    for name, values in want.items():
        np.testing.assert_allclose(atlas.columns[name], values, atol=1e-5, rtol=0, err_msg=name)


def test_minilm_atlas_equals_transformers_text_by_text(tmp_path):
    corpus, out = run_atlas(tmp_path, "minilm", TEXTS, "--limit", "5")
    texts = [t for t in TEXTS if t.strip()][:5]
    ref = transformers.AutoModel.from_pretrained(resolve_model("minilm"), attn_implementation="eager").eval()
    check_columns(out, expected(resolve_model("minilm"), ref, texts), 5)
    man = json.loads((out / "manifest.json").read_text())
    assert man["corpus"]["sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert man["corpus"]["path"] == str(corpus.resolve()) and man["texts"] == 5 and man["model"] == "minilm"
    atlas = read_atlas(out)
    got = detect(load_model("minilm", device="cpu"))
    for name in DETECTORS:
        np.testing.assert_array_equal(atlas.columns[name], got[name])
    # the text where L0 H0 is most self-attending, with its line number (blank lines counted)
    line = int(atlas.best_line["self"][0, 0])
    assert atlas.best_text[line] == TEXTS[line - 1]


def test_gpt2_atlas_equals_transformers(tmp_path):
    folder, ref = build(tmp_path, "gpt2")
    _, out = run_atlas(tmp_path, folder, TEXTS, "--no-detectors")
    texts = [t for t in TEXTS if t.strip()]
    check_columns(out, expected(folder, ref, texts), len(texts))
    assert np.isnan(read_atlas(out).columns["induction"]).all()


def one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    return err


def test_bad_input_is_one_line_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "out"
    base = ["atlas", "--model", "minilm", "--out", str(out), "--quiet"]
    assert "is not a file" in one_line_error(capsys, base + ["--corpus", str(tmp_path / "missing.txt")])
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    assert "no text" in one_line_error(capsys, base + ["--corpus", str(blank)])
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\n\xff\xfe broken\n")
    assert "line 2: not UTF-8" in one_line_error(capsys, base + ["--corpus", str(bad)])
    assert "--limit" in one_line_error(capsys, base + ["--corpus", str(bad), "--limit", "0"])
    assert not out.exists()
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    assert "not empty" in one_line_error(capsys, base + ["--corpus", str(bad)])
    assert (out / "mine.txt").read_text() == "keep me"


def test_ctrl_c_writes_nothing_and_force_replaces_an_atlas(tmp_path, capsys, monkeypatch):
    import models.reads.atlas_metrics as atlas_mod  # the metrics, in torch where the weights are

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(t for t in TEXTS if t.strip()))
    out = tmp_path / "atlas"
    argv = ["atlas", "--model", "minilm", "--corpus", str(corpus), "--out", str(out), "--quiet", "--no-detectors"]
    calls = []
    real = atlas_mod.metrics_tensor

    def interrupted(a):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(a)

    monkeypatch.setattr(atlas_mod, "metrics_tensor", interrupted)
    assert main(argv) == 130
    assert "nothing written" in capsys.readouterr().err and not out.exists()
    assert not list(tmp_path.glob(".atlas*"))  # no temporary folder left behind
    monkeypatch.setattr(atlas_mod, "metrics_tensor", real)
    assert main(argv + ["--limit", "2"]) == 0 and read_atlas(out).texts == 2
    assert main(argv + ["--limit", "3", "--force"]) == 0 and read_atlas(out).texts == 3


def test_corpus_is_streamed_not_read_whole(tmp_path):
    from models.reads.atlas import corpus_lines

    path = tmp_path / "big.txt"
    path.write_text("".join(f"text number {i}\n" for i in range(20000)))
    lines = corpus_lines(path)
    assert next(lines) == (1, "text number 0")  # a generator: the file is read as lines are asked for
    lines.close()


def test_session_atlas_key_round_trips_and_is_checked(tmp_path):
    import zipfile

    from models.cli.export import build_parser
    from models.config import InputError
    from models.files.session import Session, load_session, save_session

    run = spec_from_args(build_parser().parse_args(["--sentence", "a b", "--out", str(tmp_path / "x")]))
    good = {"corpus": "/data/texts.txt", "sha256": "ab" * 32}
    save_session(tmp_path / "s.zip", Session(run, atlas=good))
    assert load_session(tmp_path / "s.zip").atlas == good
    save_session(tmp_path / "plain.zip", Session(run))
    with zipfile.ZipFile(tmp_path / "plain.zip") as zf:
        assert "atlas" not in json.loads(zf.read("session.json"))  # no key: older readers see the same file
    save_session(tmp_path / "bad.zip", Session(run, atlas={"corpus": "x", "sha256": "nothex"}))
    with pytest.raises(InputError, match="'atlas' must be"):
        load_session(tmp_path / "bad.zip")


def test_batched_atlas_equals_one_text_at_a_time(tmp_path, monkeypatch):
    """Texts of one length run as one batch, a chunk of 4 texts at a time: the same means, standard
    deviations and best lines as each text run alone through ``layer_weights`` (1e-6)."""
    import models.reads.atlas as atlas_mod
    from models.reads.atlas import compute_atlas, corpus_lines

    monkeypatch.setattr(atlas_mod, "CHUNK_TEXTS", 4)
    lines = ["the cat sat on the mat", "a dog sat on the mat", "the cat sat", "", "a dog ran", "the cat ran",
             "hello world", "the dog sat on the cat", "a cat sat", "world hello"]  # fmt: skip
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = load_model("minilm", device="cpu")
    seen = []
    atlas = compute_atlas(model, corpus_lines(corpus), detectors=False, progress=seen.append)
    texts = [(i + 1, t) for i, t in enumerate(lines) if t]
    assert atlas.texts == len(texts) and atlas.manifest["batches"] < len(texts)  # real batches
    assert seen == sorted(seen) and seen[-1] == len(texts)  # the progress bar moves on, to the end
    per_text = []
    from models.reads.survey import head_metrics

    for _, text in texts:
        per_text.append(head_metrics(model.layer_weights(text)[1]))
    for m in METRIC_NAMES:
        stack = np.stack([t[m] for t in per_text])  # (texts, L, h)
        np.testing.assert_allclose(atlas.columns[f"{m}_mean"], np.nanmean(stack, 0), atol=1e-6, rtol=0)
        with np.errstate(invalid="ignore"):
            sd = np.nanstd(stack, 0, ddof=1)
        np.testing.assert_allclose(atlas.columns[f"{m}_sd"], sd, atol=1e-6, rtol=0)
        best = np.nanargmax(np.where(np.isnan(stack), -np.inf, stack), axis=0)  # the first text on a tie
        np.testing.assert_array_equal(atlas.best_line[m], np.array([t[0] for t in texts])[best], err_msg=m)
