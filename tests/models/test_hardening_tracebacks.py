"""The tracebacks and unclear lines of issue 36 (items 6 and 8): each is now one ``error:`` line,
exit 2 (130 for Ctrl+C), that says what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from encdec_refs import build as build_encdec
from test_pretrained_loader import write_tiny_gpt2

import models.reads.atlas as atlas_mod
import models.reads.atlas_metrics as atlas_metrics
from models.cli.atlas import atlas_main
from models.cli.train import train_main
from models.config import InputError
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")
import newer_families  # noqa: E402
import test_pretrained_families_2 as families_2  # noqa: E402

# the families whose head size defaults to hidden_size // num_attention_heads (LLaMA's blocks)
HEAD_DIM_DEFAULT = {"llama-yarn": families_2, "gemma3-pattern": families_2, "qwen3_moe-qknorm-topk": newer_families,
                    "gpt_oss-sinks-moe": families_2}  # fmt: skip


def _one_line(capsys, rc: int, code: int = 2) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()  # blank lines count: an error is one line and nothing else
    assert rc == code and len(lines) == 1 and lines[0].startswith("error: "), (rc, captured.err)
    return lines[0]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> Path:
    return write_tiny_gpt2(tmp_path_factory.mktemp("gpt2") / "tiny")


@pytest.mark.parametrize("name", list(HEAD_DIM_DEFAULT))
def test_more_heads_than_hidden_size_without_head_dim_is_one_line(tmp_path, name):
    """Was a ZeroDivisionError (``0 ** -0.5``) in LLaMA, Gemma 3, Qwen3-MoE and gpt-oss."""
    built = tmp_path / "built"
    built.mkdir()
    HEAD_DIM_DEFAULT[name].build(built, name)
    cfg = json.loads((built / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    text["num_attention_heads"] = text["num_key_value_heads"] = 2 * text["hidden_size"]
    text.pop("head_dim", None)
    (built / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError) as refused:
        load_model(built, device="cpu")
    assert "more than hidden_size" in str(refused.value) and "no head_dim" in str(refused.value)


def test_atlas_refuses_a_negative_seed(tmp_path, capsys, gpt2):
    """Was a ValueError traceback from numpy's seeding."""
    line = _one_line(capsys, atlas_main(["--model", str(gpt2), "--out", str(tmp_path / "a"), "--seed", "-1"]))
    assert "seed must be" in line and "from 0" in line and "-1" in line and not (tmp_path / "a").exists()


def test_atlas_refuses_an_encoder_decoder_model(tmp_path, capsys):
    """Was an AttributeError traceback ('EncoderDecoderModel' object has no attribute 'encode_ids')."""
    t5 = tmp_path / "t5"
    t5.mkdir()
    build_encdec(t5, "t5")
    capsys.readouterr()  # transformers' own progress bars while it was built
    line = _one_line(capsys, atlas_main(["--model", str(t5), "--out", str(tmp_path / "a"), "--quiet"]))
    assert "is an encoder-decoder model" in line and "--all-layers --block" in line


def test_atlas_with_an_empty_corpus_prints_no_blank_line_first(tmp_path, capsys, gpt2):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n\n", encoding="utf-8")
    line = _one_line(capsys, atlas_main(["--model", str(gpt2), "--corpus", str(corpus), "--out", str(tmp_path / "a")]))
    assert "no text" in line


def test_ctrl_c_in_atlas_is_an_error_line(tmp_path, capsys, monkeypatch, gpt2):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(atlas_metrics, "detector_scores", interrupted)  # the detectors run first, in torch
    monkeypatch.setattr(atlas_metrics, "metrics_tensor", interrupted)
    out = tmp_path / "a"
    line = _one_line(capsys, atlas_main(["--model", str(gpt2), "--out", str(out), "--quiet"]), code=130)
    assert "interrupted by SIGINT" in line and not out.exists()


def test_train_into_a_non_empty_folder_does_not_suggest_a_force_it_has_not(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "mine.txt").write_text("the user's", encoding="utf-8")
    line = _one_line(capsys, train_main(["--steps", "1", "--out", str(out)]))
    assert "--force" not in line and "choose a new one" in line
    assert (out / "mine.txt").read_text(encoding="utf-8") == "the user's"


# --- item 8: options never silently ignored -----------------------------------------------------


def test_layer_with_all_layers_is_refused_not_ignored(tmp_path, capsys, gpt2):
    from models.cli.export import export_main

    out = tmp_path / "out"
    argv = ["--model", str(gpt2), "--sentence", "the cat", "--layer", "0", "--all-layers", "--out", str(out)]
    line = _one_line(capsys, export_main(argv))
    assert "--layer does not apply with --all-layers" in line and not out.exists()


@pytest.mark.parametrize("argv, option", [
    (["--sentence", "the cat", "--labels", "a,b"], "--labels"),
    (["--sentence", "the cat", "--cross-sentence", "a dog", "--cross-labels", "x,y"], "--cross-labels"),
])  # fmt: skip
def test_labels_with_a_sentence_are_refused_not_ignored(tmp_path, capsys, argv, option):
    from models.cli.export import export_main

    out = tmp_path / "out"
    line = _one_line(capsys, export_main([*argv, "--out", str(out)]))
    assert line.startswith(f"error: {option} names the rows of") and not out.exists()


def test_gpt_oss_without_a_sliding_window_is_refused_as_transformers_refuses_it(tmp_path):
    """``sliding_window: null`` was taken as full attention; transformers cannot build the model."""
    built = tmp_path / "built"
    built.mkdir()
    families_2.build(built, "gpt_oss-sinks-moe")
    cfg = json.loads((built / "config.json").read_text())
    cfg["sliding_window"] = None
    (built / "config.json").write_text(json.dumps(cfg))
    import torch

    reference = transformers.GptOssModel(transformers.GptOssConfig(**cfg))
    with pytest.raises(TypeError):  # transformers' own model cannot run it, for the record
        reference(torch.tensor([[1, 2, 3]]))
    with pytest.raises(InputError, match="is a sliding-window layer but sliding_window is null"):
        load_model(built, device="cpu")


def _atlas_folder(tmp_path: Path) -> Path:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "explorer"))
    from test_atlas_window import fake_atlas

    return atlas_mod.write_atlas(fake_atlas(0), tmp_path / "atlas")


@pytest.mark.parametrize("change, words", [
    (lambda t: t.replace("layer,", "lair,", 1), "a row has no 'layer'"),
    (lambda t: t.replace("\n2,", "\n1000000000000,", 1), "layer 1000000000000 is out of range"),
    (lambda t: t.replace("\n2,", "\n-1,", 1), "layer -1 is out of range"),
    (lambda t: t.replace("\n2,3,", "\n99,99,", 1), "rows for 100 layers × 100 heads"),
    (lambda t: t.replace("\n0,0,5,", "\n0,0,inf,", 1), "texts is inf, not a value an atlas holds"),
    (lambda t: t.replace("\n0,0,5,", "\n0,0,five,", 1), "could not convert string to float: 'five'"),
])  # fmt: skip
def test_a_hostile_atlas_table_is_one_line(tmp_path, change, words):
    """Issue 36: read_atlas read heads.csv with open() and trusted it: a missing column was a KeyError
    traceback, a layer of 10¹² a table of 10¹² cells (a MemoryError), -1 a head silently misplaced."""
    folder = _atlas_folder(tmp_path)
    heads = folder / atlas_mod.HEADS_FILE
    heads.write_text(change(heads.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(InputError) as refused:
        atlas_mod.read_atlas(folder)
    assert words in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
    assert f"{folder} is not an atlas folder" in str(refused.value)


def test_an_atlas_table_that_is_not_utf8_or_too_big_is_one_line(tmp_path, monkeypatch):
    folder = _atlas_folder(tmp_path)
    (folder / atlas_mod.TOP_FILE).write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="is not an atlas folder .*codec can't decode"):
        atlas_mod.read_atlas(folder)
    monkeypatch.setattr(atlas_mod, "MAX_ATLAS_BYTES", 100)
    with pytest.raises(InputError, match=r"heads.csv is too large \(\d[\d,]* bytes; at most 100\)"):
        atlas_mod.read_atlas(folder)
