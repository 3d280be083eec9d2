"""Encoder-decoder models on the command line: export (one layer, --all-layers) and explain, per block."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.cli.explain import explain_main
from models.cli.export import export_main
from models.pretrained import load_model
from models.reads.encdec_params import encdec_params
from models.reads.explain import explain

pytest.importorskip("transformers")
from encdec_refs import SOURCE, TARGET, build, reference  # noqa: E402

BLOCKS = ("encoder", "decoder", "cross")


@pytest.fixture(scope="module", params=["t5", "bart"])
def built(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    ref_model, tok = build(folder, request.param)
    return folder, reference(ref_model, tok)


def refs_of(out, block):
    return {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}[block]


def args(folder, *more):
    return ["--model", str(folder), "--sentence", SOURCE, "--cross-sentence", TARGET, "--device", "cpu", *more]


@pytest.mark.parametrize("block", BLOCKS)
def test_export_one_layer_of_each_block(built, tmp_path, block, capsys):
    folder, out = built
    dest = tmp_path / "out"
    assert export_main(args(folder, "--block", block, "--layer", "1", "--out", str(dest))) == 0
    man = json.loads((dest / "manifest.json").read_text())
    assert man["config"]["block"] == block and man["config"]["layer"] == 1
    np.testing.assert_allclose(np.load(dest / "weights.npy"), refs_of(out, block)[1][0].numpy(), atol=1e-5)
    n_q, n_k = refs_of(out, block)[1].shape[-2:]
    assert len(man["query_tokens"]) == n_q and len(man["key_tokens"]) == n_k
    if block == "cross":
        assert (dest / "query_input.npy").is_file()


@pytest.mark.parametrize("block", BLOCKS)
def test_export_all_layers_of_each_block(built, tmp_path, block):
    folder, out = built
    dest = tmp_path / "all"
    given = ("--block", block) if block != "cross" else ()  # cross is the default
    assert export_main(args(folder, *given, "--all-layers", "--out", str(dest))) == 0
    man = json.loads((dest / "manifest.json").read_text())
    assert man["block"] == block and man["encoder_decoder"] is True
    refs = np.stack([r[0].numpy() for r in refs_of(out, block)])
    np.testing.assert_allclose(np.load(dest / "attention.npy"), refs, atol=1e-5)
    assert (dest / "rollout.npy").is_file() == (block != "cross")  # no rollout of a non-square block
    assert len(man["query_tokens"]) == refs.shape[2] and len(man["tokens"]) == refs.shape[3]


def test_every_stage_of_every_block_explains_itself(built):
    folder, _ = built
    model = load_model(folder, device="cpu")
    rng = np.random.default_rng(0)
    for block in BLOCKS:
        trace = model.trace(SOURCE, 1, cross_sentence=TARGET, block=block)
        params = encdec_params(model, trace)
        for stage in trace.stages:
            for _ in range(3):
                cell = tuple(int(rng.integers(0, s)) for s in stage.shape)
                d = explain(trace, params, stage.name, cell)
                value = float(stage.array[cell])
                assert d.value == value or (np.isneginf(d.value) and np.isneginf(value)), (block, stage.name, cell)
                if d.sum_of and np.isfinite(value):
                    terms = np.array([t.value for t in d.sum_of], dtype=np.float64)
                    tolerance = 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(terms).sum()))
                    assert abs(terms.sum() - value) <= tolerance, (block, stage.name, cell, terms.sum(), value)


def test_explain_on_the_command_line(built, capsys):
    folder, _ = built
    assert explain_main(args(folder, "--block", "decoder", "--layer", "0", "--stage", "weights",
                             "--cell", "0,1,2", "--json")) == 0  # fmt: skip
    d = json.loads(capsys.readouterr().out)
    assert d["value"] == 0.0  # causal: key 2 is after query 1


def test_refusals_are_one_line_and_write_nothing(built, tmp_path, capsys):
    folder, _ = built
    dest = tmp_path / "x"
    no_target = ["--model", str(folder), "--sentence", SOURCE, "--device", "cpu"]
    cases = [
        (no_target + ["--out", str(dest)], "give the target sentence with --cross-sentence"),
        (no_target + ["--all-layers", "--out", str(dest)], "give the target sentence with --cross-sentence"),
        (args(folder, "--mask", "none", "--out", str(dest)), "only the model's own masks"),
        (args(folder, "--mask", "causal", "--all-layers", "--out", str(dest)), "only the model's own masks"),
        (args(folder, "--pad-positions", "1", "--out", str(dest)), "pad positions are not supported"),
        (args(folder, "--block", "decoder", "--layer", "9", "--out", str(dest)), "decoder block has 3 layers"),
        (["--sentence", "a b", "--block", "cross", "--out", str(dest)], "--block applies only with --model"),
        (["--model", "minilm", "--sentence", "a b", "--cross-sentence", "c", "--out", str(dest)],
         "--cross-sentence applies only to encoder-decoder models"),
    ]  # fmt: skip
    for argv, message in cases:
        assert export_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not dest.exists()


def test_the_hub_cache_lists_encoder_decoders(built, tmp_path, monkeypatch):
    from models.pretrained import list_models

    folder, _ = built
    snap = tmp_path / "hub" / "models--org--tiny-seq2seq" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    for f in folder.iterdir():
        (snap / f.name).symlink_to(f)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    cached = {e.name: e.model_type for e in list_models() if e.source == "cache"}
    model_type = json.loads((folder / "config.json").read_text())["model_type"]
    assert cached == {"org/tiny-seq2seq": model_type}
    assert load_model("org/tiny-seq2seq", device="cpu").block_layers("cross") == 3
