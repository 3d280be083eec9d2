"""models.api, the front door for Python, against what the command lines write: ``toy`` and
``Model.trace`` equal ``export``'s files, ``Trace.explain`` equals ``explain --json``,
``Model.generate`` equals ``generate``'s files, ``Model.atlas`` equals ``atlas``'s heads.csv, and the
user's mistakes are one-line InputErrors."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from main import main
from models import api
from models.config import InputError
from models.reads.atlas import COLUMNS

SENTENCE = "The cat sat on the mat."
TOY = {"heads": 2, "d_model": 8, "mask": "causal", "pe": "sinusoidal", "score": "additive", "bias": True,
       "cross_sentence": "a dog barked", "seed": 3}  # fmt: skip
REPEATED = "k78lt2nxawscgzef4j1qk78lt2nxawscgzef4j1q"


def options(settings: dict) -> list[str]:
    """The command line of keyword settings (the option table's dests)."""
    argv = []
    for dest, value in settings.items():
        flag = "--" + dest.replace("_", "-")
        shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        argv += [flag] if value is True else [flag, shown]
    return argv


def exported(tmp_path, capsys, argv: list[str]):
    out = tmp_path / "export"
    assert main(["export", *argv, "--out", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return manifest, {s["name"]: np.load(out / s["file"]) for s in manifest["stages"]}


def explained(capsys, argv: list[str], stage: str, cell) -> dict:
    assert main(["explain", "--stage", stage, "--cell", ",".join(map(str, cell)), "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_toy_equals_export_stage_by_stage(tmp_path, capsys):
    trace = api.toy(SENTENCE, **TOY)
    manifest, arrays = exported(tmp_path, capsys, ["--sentence", SENTENCE, *options(TOY)])
    assert trace.stages == tuple(s["name"] for s in manifest["stages"]) and "weights" in trace.stages
    assert list(trace.tokens) == manifest["key_tokens"] and list(trace.query_tokens) == manifest["query_tokens"]
    assert trace.config == manifest["config"]
    for name, array in arrays.items():
        np.testing.assert_array_equal(trace.stage(name), array, err_msg=name)
    assert trace.stage("weights").shape == (2, 3, 7)  # heads first: 3 queries (the second sentence), 7 keys


def test_toy_defaults_are_exports(tmp_path, capsys):
    """No settings: export's defaults (2 heads, d_model 16, no mask, seed 0), from the one table."""
    trace = api.toy(SENTENCE)
    manifest, arrays = exported(tmp_path, capsys, ["--sentence", SENTENCE])
    assert trace.config == manifest["config"]
    assert trace.config["heads"] == 2 and trace.config["mask"] == "none" and trace.config["seed"] == 0
    assert trace.stage("weights").shape == (2, 7, 7) and trace.stage("input").shape == (7, 16)
    np.testing.assert_array_equal(trace.stage("output"), arrays["output"])


def test_toy_explain_equals_explain_json(capsys):
    trace = api.toy(SENTENCE, **TOY)
    argv = ["--sentence", SENTENCE, *options(TOY)]
    for stage, cell in [("weights", (1, 2, 4)), ("scores", (0, 1, 3)), ("q", (1, 2, 0)), ("output", (0, 5)),
                        ("masked", (0, 0, 5))]:  # fmt: skip
        got = trace.explain(stage, cell)
        assert got == explained(capsys, argv, stage, cell), stage
        value = float(trace.stage(stage)[cell])
        assert got["cell"] == list(cell) and got["value"] == (value if np.isfinite(value) else "-inf")


def test_arrays_in_memory_equal_their_files(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    in_memory = api.toy(embeddings=x, heads=2, d_model=8, pad_positions=[3, 1], mask="padding")
    from_file = api.toy(embeddings=tmp_path / "x.npy", heads=2, d_model=8, pad_positions="1,3", mask="padding")
    _, arrays = exported(tmp_path, capsys, ["--embeddings", str(tmp_path / "x.npy"), "--heads", "2", "--d-model",
                                            "8", "--pad-positions", "1,3", "--mask", "padding"])  # fmt: skip
    for name, array in arrays.items():
        np.testing.assert_array_equal(in_memory.stage(name), array, err_msg=name)
        np.testing.assert_array_equal(from_file.stage(name), array, err_msg=name)
    assert np.all(in_memory.stage("weights")[:, :, [1, 3]] == 0)


@pytest.fixture(scope="module")
def minilm():
    return api.load("minilm", device="cpu")


def test_model_trace_equals_export_and_explain(minilm, tmp_path, capsys):
    trace = minilm.trace(SENTENCE, layer=2)
    argv = ["--model", "minilm", "--layer", "2", "--sentence", SENTENCE, "--device", "cpu"]
    manifest, arrays = exported(tmp_path, capsys, argv)
    assert list(trace.tokens) == manifest["key_tokens"] and trace.tokens[0] == "[CLS]"
    assert trace.stages == tuple(arrays)
    for name, array in arrays.items():
        np.testing.assert_array_equal(trace.stage(name), array, err_msg=name)
    for stage, cell in [("weights", (3, 4, 1)), ("q", (11, 2, 30)), ("head_output", (5, 1, 7))]:
        assert trace.explain(stage, cell) == explained(capsys, argv, stage, cell), stage


def test_model_trace_takes_the_model_rows_of_the_table(minilm, tmp_path, capsys):
    trace = minilm.trace("The cat sat.", layer=1, mask="padding", pad_positions=[2])
    argv = ["--model", "minilm", "--layer", "1", "--sentence", "The cat sat.", "--mask", "padding",
            "--pad-positions", "2", "--device", "cpu"]  # fmt: skip
    _, arrays = exported(tmp_path, capsys, argv)
    np.testing.assert_array_equal(trace.stage("weights"), arrays["weights"])
    assert np.all(trace.stage("weights")[:, :, 2] == 0)
    assert trace.explain("masked", (0, 0, 2)) == explained(capsys, argv, "masked", (0, 0, 2))


@pytest.fixture(scope="module")
def induction():
    return api.load("induction", device="cpu")


def test_step_picks_a_checkpoint_as_the_command_line_does(tmp_path, capsys):
    first = api.load("induction", step="first", device="cpu")
    assert first.name.endswith("step-000000") and api.load("induction", step=0).name == first.name
    argv = ["--model", "induction", "--step", "first", "--sentence", REPEATED, "--layer", "1", "--device", "cpu"]
    _, arrays = exported(tmp_path, capsys, argv)
    np.testing.assert_array_equal(first.trace(REPEATED, layer=1).stage("weights"), arrays["weights"])
    assert api.load("induction", step="583").name.endswith("step-000583")
    with pytest.raises(InputError, match=r"has no step 8 \(nearest: 7;"):
        api.load("induction", step=8)


def test_generate_equals_the_generate_command(induction, tmp_path, capsys):
    for sampling in ({}, {"temperature": 1.3, "top_k": 5, "top_p": 0.9, "seed": 4}):
        gen = induction.generate(REPEATED[:25], max_new_tokens=8, **sampling)
        out = tmp_path / f"gen{len(sampling)}"
        assert main(["generate", "--model", "induction", "--prompt", REPEATED[:25], "--max-new-tokens", "8",
                     "--device", "cpu", "--out", str(out), *options(sampling)]) == 0  # fmt: skip
        capsys.readouterr()
        tokens = json.loads((out / "tokens.json").read_text(encoding="utf-8"))
        assert gen.ids == tokens["ids"] and gen.prompt_length == tokens["prompt_length"]
        assert len(gen.ids) == len(gen.tokens) == gen.prompt_length + 8
        np.testing.assert_array_equal(gen.attention, np.load(out / "attention.npy"))
        np.testing.assert_array_equal(gen.lens_ids, np.load(out / "lens_ids.npy"))
        np.testing.assert_array_equal(gen.lens_prob, np.load(out / "lens_prob.npy"))
    assert gen.attention.shape == (2, 4, len(gen.ids), len(gen.ids))
    greedy = induction.generate(REPEATED[:25], max_new_tokens=8)
    assert greedy.text == REPEATED[25:33]  # the induction heads copy the repeated block


def test_atlas_rows_equal_heads_csv(induction, tmp_path, capsys):
    texts = ["abc abc abc", "", "the cat sat on the mat", "  ", REPEATED]
    rows = induction.atlas(texts)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "atlas"
    assert main(["atlas", "--model", "induction", "--corpus", str(corpus), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    with open(out / "heads.csv", newline="", encoding="utf-8") as f:
        written = list(csv.DictReader(f))
    assert len(rows) == len(written) == 2 * 4 and list(rows[0]) == list(COLUMNS)
    assert rows[0]["texts"] == 3  # the blank texts skipped
    for row, line in zip(rows, written, strict=True):
        assert row == {c: int(line[c]) if c in ("layer", "head", "texts") else float(line[c]) for c in COLUMNS}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: api.toy(SENTENCE, heads_count=2), "unknown setting 'heads_count'"),
        (lambda: api.toy(SENTENCE, heads="2"), "option heads must be an integer"),
        (lambda: api.toy(SENTENCE, heads=None), "setting heads cannot be None"),
        (lambda: api.toy(SENTENCE, weights=[1, 2]), "setting weights takes a path"),
        (lambda: api.toy(SENTENCE, heads=0), "--heads must be at least 1"),
        (lambda: api.toy(SENTENCE, mask="diagonal"), "option mask must be one of"),
        (lambda: api.toy(SENTENCE, layer=3), "--layer applies only with --model"),
        (lambda: api.toy(SENTENCE, model="minilm"), "toy() is the toy engine"),
        (lambda: api.toy(""), "empty"),
        (lambda: api.toy(SENTENCE).stage("attention"), "no stage 'attention'"),
        (lambda: api.toy(SENTENCE).explain("weights", (0, 9, 1)), "outside stage 'weights'"),
        (lambda: api.load("no-such-model-here"), "no-such-model-here"),
        (lambda: api.load("minilm", device="tpu"), "option device must be one of"),
    ],
)
def test_mistakes_are_one_line_input_errors(call, message):
    with pytest.raises(InputError) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_model_mistakes_are_one_line_input_errors(minilm):
    with pytest.raises(InputError, match="'heads' is not a setting of a model's trace"):
        minilm.trace(SENTENCE, heads=2)
    with pytest.raises(InputError, match="layer 6 is out of range"):
        minilm.trace(SENTENCE, layer=6)
    with pytest.raises(InputError, match="not a decoder"):
        minilm.generate("The cat")
    with pytest.raises(InputError, match="applies only to encoder-decoder"):
        minilm.trace(SENTENCE, block="cross")


def test_a_stage_is_read_only():
    weights = api.toy(SENTENCE).stage("weights")
    with pytest.raises(ValueError, match="read-only"):
        weights[0, 0, 0] = 1.0
    assert api.toy(SENTENCE).stage("weights")[0, 0, 0] == weights[0, 0, 0]


@pytest.mark.parametrize("model", [None, "minilm"])
def test_trace_why_is_what_the_why_command_prints(model, capsys):
    from main import main

    sentence = "The cat sat on the mat."
    trace = api.load(model).trace(sentence, layer=1) if model else api.toy(sentence, heads=2, pe="sinusoidal")
    got = trace.why(1, 3, 2)
    argv = ["why", "--sentence", sentence, "--cell", "1,3,2", "--json"]
    argv += ["--model", model, "--layer", "1"] if model else ["--heads", "2", "--pe", "sinusoidal"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["score"] == pytest.approx(got["score"], rel=1e-6)
    assert printed["query_sources"] == got["query_sources"] and printed["key_sources"] == got["key_sources"]
    np.testing.assert_allclose(np.array(printed["table"]), np.array(got["table"]), rtol=1e-6, atol=1e-7)
    assert np.sum(got["table"]) == pytest.approx(trace.stage("scaled")[1, 3, 2], rel=1e-5)
