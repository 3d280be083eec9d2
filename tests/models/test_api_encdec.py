"""models.api with an encoder-decoder (a random T5 built with transformers): ``Model.trace`` with
``cross_sentence`` and ``block`` equals ``export`` and ``explain --json`` for each of its three
attentions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from encdec_refs import SOURCE, TARGET, build

from main import main
from models import api
from models.config import InputError


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t5")
    build(folder, "t5")
    return folder


@pytest.mark.parametrize(("block", "cell"), [("encoder", (1, 4, 7)), ("decoder", (2, 3, 1)), ("cross", (0, 2, 9))])
def test_each_block_equals_export_and_explain(t5, tmp_path, capsys, block, cell):
    model = api.load(t5, device="cpu")
    trace = model.trace(SOURCE, layer=1, block=block, cross_sentence=TARGET)
    argv = ["--model", str(t5), "--sentence", SOURCE, "--cross-sentence", TARGET, "--block", block,
            "--layer", "1", "--device", "cpu"]  # fmt: skip
    out = tmp_path / "out"
    assert main(["export", *argv, "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert list(trace.query_tokens) == manifest["query_tokens"] and list(trace.tokens) == manifest["key_tokens"]
    for entry in manifest["stages"]:
        np.testing.assert_array_equal(trace.stage(entry["name"]), np.load(out / entry["file"]), err_msg=entry["name"])
    capsys.readouterr()
    assert main(["explain", "--stage", "weights", "--cell", ",".join(map(str, cell)), "--json", *argv]) == 0
    assert trace.explain("weights", cell) == json.loads(capsys.readouterr().out)


def test_an_encoder_decoder_needs_its_target(t5):
    with pytest.raises(InputError, match="give the target sentence"):
        api.load(t5, device="cpu").trace(SOURCE)
