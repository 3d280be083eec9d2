"""``why`` on a random model of every family the registry names: the table adds up to the recorded
``scaled`` cell (1e-5 relative), the row split to the top key's margin over the weighted mean, every
source of the layers below is named; the encoder-decoders' three blocks are split (T5's position bias
one more term; cross-attention's keys from the encoder's stream).

The matrix is the zoo's (tests/models/zoo.py, held to ``models.pretrained.registry.SUPPORTED_TYPES``):
every row of it, each built with its own recipe (post-norm OPT, sequential GPT-NeoX and Falcon, ...
each as their own variant)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from zoo import RECIPES, ZOO, build_own

from models.pretrained import load_model
from models.pretrained.registry import ENCODER_DECODER_TYPES, SUPPORTED_TYPES
from models.reads.why import why

transformers = pytest.importorskip("transformers")

SENTENCE = "the cat sat on the mat while a dog was walking in the park"


def variants() -> dict[str, str]:
    """variant name -> zoo case (tests/models/zoo.py): every row of the zoo, each built with its own
    recipe, once per name its family tests know it by (a configuration the generation tests also
    build as a causal LM under the same name runs once, as the base model)."""
    found: dict[str, str] = {}
    for name, case in sorted(ZOO.items(), key=lambda item: item[1].recipe == "generate_refs"):
        found.setdefault(name.removeprefix(RECIPES[case.recipe]), name)
    return found


VARIANTS = variants()
BUILDERS = {variant: ZOO[name].family for variant, name in VARIANTS.items()}  # variant -> registry family


SPLIT = [name for name, t in BUILDERS.items() if t not in ENCODER_DECODER_TYPES]
ENCODER_DECODERS = sorted({t for t in BUILDERS.values() if t in ENCODER_DECODER_TYPES})


def test_every_registry_type_has_a_builder():
    assert set(BUILDERS.values()) == set(SUPPORTED_TYPES)


def _model(tmp_path, variant):
    build_own(tmp_path, VARIANTS[variant])
    return load_model(tmp_path, device="cpu")


@pytest.mark.parametrize("variant", SPLIT)
def test_split_adds_up_in_every_family(tmp_path, variant):
    torch.manual_seed(0)
    model = _model(tmp_path, variant)
    assert model.model_type == BUILDERS[variant]
    layer = model.num_layers - 1  # every layer below is split into its sources
    trace = model.trace(SENTENCE, layer)
    n = len(trace.query_tokens)
    scaled = trace["scaled"]
    for head in sorted({0, model.num_heads - 1}):
        for row, col in ((n - 1, 1), (n - 2, n - 2)):
            result = why(trace, head, row, col, model=model, with_row=True)
            table = np.asarray(result["table"])
            score = float(scaled.cell(head, row, col))
            assert result["score"] == score
            assert abs(table.sum() - score) <= 1e-5 * max(abs(score), np.abs(table).sum())
            names = result["query_sources"]
            assert names == result["key_sources"] and names[0] == "embed" and names[-1] == "bias"
            heads_below = {f"L{i} H{h}" for i in range(layer) for h in range(model.num_heads)}
            assert heads_below <= set(names) and {f"L{i} mlp" for i in range(layer)} <= set(names)
            assert table.shape == (len(names), len(names))
            split = result["row_split"]
            assert abs(np.sum(split["table"]) - split["margin"]) <= 1e-5 * max(1.0, np.abs(split["table"]).sum())


@pytest.mark.parametrize("model_type", ENCODER_DECODERS)
def test_encoder_decoders_split_every_block(tmp_path, model_type, capsys):
    """Every block is split: the encoder's and the decoder's self-attention (T5's position bias one more
    term; BART's and Marian's post-norm blocks and positions; the decoder's cross-attention heads as
    sources) and the cross blocks (queries from the decoder's stream, keys from the encoder's)."""
    from models.cli.why import why_main

    build_own(tmp_path, next(VARIANTS[v] for v, t in BUILDERS.items() if t == model_type))
    capsys.readouterr()  # the builder's own progress lines
    common = ["--model", str(tmp_path), "--sentence", "the cat sat on the mat", "--cross-sentence",
              "a dog ran in the park", "--layer", "1", "--cell", "1,3,2"]  # fmt: skip
    t5 = model_type in ("t5", "mt5")
    for block in ("encoder", "decoder", "cross"):
        code = why_main(common + ["--block", block, "--json"])
        result = json.loads(capsys.readouterr().out)
        table, queries, keys = np.asarray(result["table"]), result["query_sources"], result["key_sources"]
        assert code == 0 and result["stage"] == ("scaled" if not t5 else "scores" if block == "cross" else "biased")
        assert abs(table.sum() - result["score"]) <= 1e-5 * np.abs(table).sum()
        assert "L0 H0" in queries and ("pos" in queries) != t5
        assert ("L0 cross H0" in queries) == (block != "encoder")  # the decoder's cross heads write too
        if block == "cross":  # the keys are the encoder's: its sources, through its final norm
            assert keys[0] == "enc embed" and "L1 H0" in queries and "enc L0 mlp" in keys
        if t5 and block != "cross":
            assert keys[-1] == "position bias"
            assert table[-1, :-1].tolist() == [0.0] * (table.shape[1] - 1)  # the bias meets no source
