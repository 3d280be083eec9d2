"""``export --all-layers`` and ``--all-steps`` read ``--text-file`` as the other commands do (issue 50,
item 11): with ``--model`` given and the text in a file, they said "needs --model and --sentence"."""

from __future__ import annotations

import numpy as np

from models.cli.export import export_main


def test_all_layers_reads_a_text_file_as_its_sentence(tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat\non the mat\n", encoding="utf-8")
    base = ["--all-layers", "--model", "induction"]
    assert export_main([*base, "--text-file", str(text), "--out", str(tmp_path / "file")]) == 0, capsys.readouterr()
    assert export_main([*base, "--sentence", "the cat sat on the mat", "--out", str(tmp_path / "typed")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "file" / "attention.npy"),
                                  np.load(tmp_path / "typed" / "attention.npy"))  # fmt: skip


def test_a_whole_model_export_without_text_says_what_is_missing(tmp_path, capsys):
    for mode in ("--all-layers", "--all-steps"):
        assert export_main(["--model", "induction", mode, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err.splitlines()
        assert err == [f"error: {mode} needs --sentence or --text-file: the text the model reads"], err
    assert not (tmp_path / "x").exists()
