"""The corpora an atlas reads (models/reads/corpora.py): a text a line, JSONL with a "text" field, a
folder of .txt files, each streamed (a generator: nothing read ahead); the same texts give the same
heads.csv whichever form holds them; ``--limit``; a bad corpus is one ``error:`` line, nothing written."""

from __future__ import annotations

import json

import pytest

from main import main
from models.reads.corpora import corpus_identity, corpus_lines

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "hello world", "the red house", "big blue tree"]


def forms(tmp_path):
    plain = tmp_path / "c.txt"
    plain.write_text("\n".join(TEXTS[:2] + [""] + TEXTS[2:]) + "\n", encoding="utf-8")
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("\n".join(json.dumps({"id": i, "text": t}) for i, t in enumerate(TEXTS)) + "\n", encoding="utf-8")
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, t in enumerate(TEXTS):
        (folder / f"{i:03d}.txt").write_text(t + "\n", encoding="utf-8")
    (folder / "notes.md").write_text("not a text")
    return plain, jsonl, folder


def test_each_form_streams_the_same_texts(tmp_path):
    plain, jsonl, folder = forms(tmp_path)
    assert [t for _, t in corpus_lines(plain)] == TEXTS
    assert [n for n, _ in corpus_lines(plain)] == [1, 2, 4, 5, 6]  # line numbers, the blank one counted
    assert list(corpus_lines(jsonl)) == list(enumerate(TEXTS, start=1))
    assert list(corpus_lines(folder)) == list(enumerate(TEXTS, start=1))
    lines = corpus_lines(folder)
    assert next(lines) == (1, TEXTS[0])  # a generator: one file read at a time
    lines.close()
    before = corpus_identity(folder)["sha256"]
    (folder / "001.txt").write_text("changed")
    assert corpus_identity(folder)["sha256"] != before


def test_the_atlas_of_each_form_is_the_same(tmp_path):
    heads = []
    for i, corpus in enumerate(forms(tmp_path)):
        out = tmp_path / f"atlas{i}"
        assert main(["atlas", "--model", "induction", "--corpus", str(corpus), "--out", str(out), "--quiet",
                     "--no-detectors", "--limit", "4"]) == 0  # fmt: skip
        heads.append((out / "heads.csv").read_text())
    assert heads[0].splitlines()[1].split(",")[2] == "4"
    assert heads[0] == heads[1] == heads[2]


@pytest.mark.parametrize("name, content, words", [
    ("bad.jsonl", '{"text": "fine"}\n[1, 2]\n', "line 2: no \"text\" string"),
    ("bad2.jsonl", '{"text": "fine"}\n{not json\n', "line 2: not a JSON object"),
    ("bad3.jsonl", '{"text": 5}\n', "line 1: no \"text\" string"),
    ("empty", None, "has no .txt files"),
    ("latin", b"caf\xe9\n", "not UTF-8"),
])  # fmt: skip
def test_a_bad_corpus_is_one_line(tmp_path, capsys, name, content, words):
    path = tmp_path / name
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.mkdir()
        (path / "a.txt").write_bytes(content)
    else:
        path.write_text(content)
    out = tmp_path / "never"
    assert main(["atlas", "--model", "induction", "--corpus", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and words in err, err
    assert not out.exists() and not list(tmp_path.glob(".never*"))
