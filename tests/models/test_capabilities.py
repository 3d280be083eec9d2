"""Every capability in every family, the matrix derived from the registry (tests/models/zoo.py):
one random model per family the registry names, driven through the command lines a user runs.

- ``export`` of the last layer: its weights equal transformers' eager attention;
- ``export --all-layers``: every layer's attention equals transformers';
- ``explain`` of a weight: the value ``export`` wrote;
- ``why`` of a score: its sources' table adds up to the score (every block of an encoder-decoder), its
  residual wiring and embedding sources being data on the family class;
- ``atlas`` and ``generate``: done (a row per head; a decoder generates, exact in test_generate.py),
  or refused by name with one ``error:`` line and status 2, never a traceback.
A family added to the registry without a zoo case fails here at once.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from zoo import ZOO, build, first_case_of_each_family, missing_types

from main import main
from models.pretrained import load_model
from models.pretrained.loader import family_kind

transformers = pytest.importorskip("transformers")

SENTENCE = "the cat sat on the mat while a dog"
TARGET = "a dog sat"


def test_every_family_of_the_registry_has_a_case():
    assert missing_types() == set()


@pytest.fixture(scope="module", params=first_case_of_each_family())
def family(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    ref = build(folder, request.param)
    return request.param, folder, ref, family_kind(ZOO[request.param][0])


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def model_args(folder, kind) -> list[str]:
    args = ["--model", folder, "--sentence", SENTENCE, "--device", "cpu"]
    return args + (["--cross-sentence", TARGET] if kind == "encoder-decoder" else [])


def reference_attentions(folder, ref, kind) -> np.ndarray:
    """transformers' attention of every layer ``(L, h, n, n)`` on our tokenizer's ids."""
    ids = torch.tensor([load_model(folder, device="cpu").encode(SENTENCE).ids])
    with torch.no_grad():
        out = ref(ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    return np.stack([a[0].numpy() for a in out.attentions])


def refused_by_name(code: int, err: str) -> bool:
    lines = err.strip().splitlines()
    return code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err


def test_export_and_all_layers_equal_transformers(family, tmp_path, capsys):
    name, folder, ref, kind = family
    layers = load_model(folder, device="cpu").num_layers
    code, _, err = run(capsys, "export", *model_args(folder, kind), "--layer", layers - 1, "--out", tmp_path / "one")
    assert code == 0, err
    weights = np.load(tmp_path / "one" / "weights.npy")
    assert np.isfinite(weights).all()
    code, _, err = run(capsys, "export", *model_args(folder, kind), "--all-layers", "--out", tmp_path / "all")
    assert code == 0, err
    every = np.load(tmp_path / "all" / "attention.npy")
    n = every.shape[-1]
    np.testing.assert_array_equal(every[-1], weights[..., :n])  # one layer's trace and the pass agree
    if kind == "encoder-decoder":  # their three attentions: tests/models/test_pretrained_encdec.py
        return
    theirs = reference_attentions(folder, ref, kind)
    np.testing.assert_allclose(every, theirs, atol=1e-5, rtol=0, err_msg=name)


def test_explain_gives_the_exported_value(family, tmp_path, capsys):
    name, folder, _, kind = family
    code, _, err = run(capsys, "export", *model_args(folder, kind), "--out", tmp_path / "x")
    assert code == 0, err
    weights = np.load(tmp_path / "x" / "weights.npy")
    cell = (weights.shape[0] - 1, weights.shape[1] - 1, 0)
    code, out, err = run(capsys, "explain", *model_args(folder, kind), "--stage", "weights",
                         "--cell", ",".join(map(str, cell)), "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["value"] == pytest.approx(float(weights[cell]), rel=1e-6, abs=1e-7), name


def test_why_splits_a_score_into_sources_that_add_up(family, capsys):
    name, folder, _, kind = family
    model = load_model(folder, device="cpu")
    blocks = ("encoder", "decoder", "cross") if kind == "encoder-decoder" else (None,)
    layer = 1 if kind == "encoder-decoder" else model.num_layers - 1  # the zoo's encoders have 2 layers
    for block in blocks:
        extra = ["--block", block] if block else []
        code, out, err = run(capsys, "why", *model_args(folder, kind), "--layer", layer,
                             "--cell", "0,2,1", *extra, "--json")  # fmt: skip
        assert code == 0, (name, block, err)
        result = json.loads(out)
        table = np.asarray(result["table"])
        assert result["query_sources"][0].endswith("embed"), (name, result["query_sources"])
        assert abs(table.sum() - result["score"]) <= 1e-5 * max(1.0, np.abs(table).sum()), (name, block)


def test_atlas_and_generate_work_or_refuse_by_name(family, tmp_path, capsys):
    name, folder, _, kind = family
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\na dog is walking in the park\n", encoding="utf-8")
    code, _, err = run(capsys, "atlas", "--model", folder, "--corpus", corpus, "--out", tmp_path / "atlas",
                       "--no-detectors", "--quiet", "--device", "cpu")  # fmt: skip
    if code == 0:
        model = load_model(folder, device="cpu")
        rows = (tmp_path / "atlas" / "heads.csv").read_text(encoding="utf-8").strip().splitlines()
        assert len(rows) - 1 == model.num_layers * model.num_heads, name
    else:
        assert refused_by_name(code, err), err
    code, _, err = run(capsys, "generate", "--model", folder, "--prompt", "the cat", "--max-new-tokens", 3,
                       "--out", tmp_path / "gen", "--device", "cpu")  # fmt: skip
    if kind == "decoder":
        assert code == 0, err
    elif kind == "encoder-decoder":  # refused by capability and family, not as a missing MLM head
        assert refused_by_name(code, err) and "encoder-decoder" in err and "generate" in err, err
    else:
        assert refused_by_name(code, err), err



def test_a_trace_too_large_for_memory_says_how_many_tokens_fit(family, tmp_path, capsys, monkeypatch):
    """Issue 34: memory is checked before starting, and the one line says what fits, for a model too
    (it said so only for the toy): given the room of half the tokens, the refusal names at least that
    half and fewer than asked, and that many tokens then do run (``--max-tokens``), one more does not."""
    import models.memory as memory

    name, folder, _, kind = family
    model = load_model(folder, device="cpu")
    long = " ".join(["the cat sat on the mat"] * 30)
    asked = len(model.encode(long).ids)
    if kind == "encoder-decoder":  # source and target each of the length asked
        room = memory.estimate_encdec_peak(model.arch, asked // 2, 0)
    else:
        room = memory.estimate_pretrained_peak(model.arch, asked // 2, 0) + model.arch.layers.bytes_to_read([0])
    room = max(room, memory.estimate_pretrained_load(sorted(folder.glob("*.safetensors"))))  # loading fits
    monkeypatch.setattr(memory, "available_bytes", lambda: room)
    args = ["export", "--model", folder, "--sentence", long, "--device", "cpu", "--layer", 0]
    args += ["--cross-sentence", long] if kind == "encoder-decoder" else []
    code, _, err = run(capsys, *args, "--out", tmp_path / "all")
    assert refused_by_name(code, err) and "fit with these settings" in err and not (tmp_path / "all").exists()
    fit = int(err.split("at most ")[1].split(" ")[0].replace(",", ""))
    assert asked // 2 <= fit < asked, err
    code, _, err = run(capsys, *args, "--max-tokens", fit, "--out", tmp_path / "fit")
    assert code == 0, err
    code, _, err = run(capsys, *args, "--max-tokens", fit + 1, "--out", tmp_path / "more")
    assert refused_by_name(code, err) and not (tmp_path / "more").exists()


def test_generation_reads_per_token_only_the_layers_that_do_not_fit(family, monkeypatch):
    """Issue 45, in every decoder family: with room for every layer nothing is read from the checkpoint
    per generated token; with none, every layer is, as its residency says (the status line's words)."""
    import models.memory as memory
    from models.generate import GenerateSettings, generate
    from models.pretrained import loader

    name, folder, _, kind = family
    if kind != "decoder":
        return
    monkeypatch.setattr(loader, "PRELOAD_FILE_BYTES", 0)  # read layer by layer, as a big checkpoint is
    for budget, per_token in (("", 0), ("0", None)):
        monkeypatch.setenv(memory.LAYER_BUDGET_ENV, budget)
        model = load_model(folder, device="cpu")
        store = model.arch.layers
        marks = []
        gen = generate(model, "the cat", GenerateSettings(max_new_tokens=4, lens=False),
                       on_step=lambda done, total, s=store, m=marks: m.append(s.reads))  # fmt: skip
        expected = store.residency().per_pass if per_token is None else per_token
        assert [b - a for a, b in zip(marks, marks[1:])] == [expected] * (len(marks) - 1), name
        assert (expected == 0) == gen.weights.startswith("weights resident"), (name, gen.weights)
        assert per_token == 0 or expected == store.count > 1, name
