"""explain(): every cell of every stage derives to the traced value, and its summands add up to it.

Property tests over seeded random cells of the toy engine (all score functions, masks, biases, PE,
cross-attention) and of pretrained models (MiniLM, a random GPT-2, a random LLaMA-style model with
rotary positions, grouped-query heads and biases).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from models.config import AttentionConfig, AttentionRequest, InputError
from models.engine.pipeline import run
from models.engine.trace import AttentionTrace
from models.reads.explain import Derivation, explain
from models.reads.params import LayerParams, pretrained_params, toy_params

EPS32 = float(np.finfo(np.float32).eps)


def random_cells(trace: AttentionTrace, stage: str, rng: np.random.Generator, count: int = 6):
    shape = trace[stage].shape
    cells = {tuple(0 for _ in shape), tuple(s - 1 for s in shape)}
    while len(cells) < min(count, int(np.prod(shape))):
        cells.add(tuple(int(rng.integers(0, s)) for s in shape))
    return sorted(cells)


def check_derivation(d: Derivation, trace: AttentionTrace) -> None:
    """The value is the traced cell; the summands add up to it to float32 rounding."""
    expected = trace[d.stage].array[d.cell]
    assert d.value == float(expected) or (math.isnan(d.value) and math.isnan(expected))
    assert d.text() and json.loads(d.to_json())["cell"] == list(d.cell)
    if d.sum_of is not None:
        magnitude = sum(abs(t.value) for t in d.sum_of)
        # float32 accumulation: measured at most 2.4 ulps of the terms' magnitude (MiniLM q, 385 terms)
        tol = 8 * EPS32 * magnitude + 1e-30
        assert abs(d.total() - d.value) <= tol, (d.stage, d.cell, d.total(), d.value, tol)
    if d.stage == "weights":
        e, total = np.array(d.details["exponentials"]), d.details["exp_sum"]
        j = d.cell[2]
        quotient = e[j] / total if total > 0 else 0.0
        assert abs(quotient - d.value) <= 4 * EPS32 * max(d.value, 1e-30) + 1e-9
        assert d.details["row_sum"] == pytest.approx(1.0 if total > 0 else 0.0, abs=1e-5)
    if d.stage == "masked" and math.isinf(d.value):
        assert d.details["hidden"] and d.details["why"]
        assert trace["weights"].array[d.cell] == 0.0
    if d.stage == "positional_encoding":
        i, j, dim = d.details["i"], d.details["j"], d.details["d"]
        f = math.sin if d.details["function"] == "sin" else math.cos
        assert np.float32(f(i / 10000 ** (2 * j / dim))) == np.float32(d.value)


def check_every_stage(trace: AttentionTrace, params: LayerParams, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    checked = 0
    for stage in trace.names:
        for cell in random_cells(trace, stage, rng):
            check_derivation(explain(trace, params, stage, cell), trace)
            checked += 1
    return checked


# --- the toy engine ---------------------------------------------------------------------------------

SENTENCE = "the cat sat on the mat because it was tired"


def toy(sentence=SENTENCE, **config) -> tuple[AttentionTrace, LayerParams]:
    custom = config.pop("custom_mask", None)
    cross = config.pop("cross_sentence", None)
    req = AttentionRequest(
        config=AttentionConfig(**({"heads": 2, "d_model": 16} | config)),
        sentence=sentence, cross_sentence=cross, custom_mask=custom,
    )  # fmt: skip
    return run(req), toy_params(req)


@pytest.mark.parametrize("score", ["dot", "scaled", "general", "additive"])
@pytest.mark.parametrize("mask", ["none", "causal", "padding"])
@pytest.mark.parametrize("bias", [False, True])
def test_toy_every_stage_scores_masks_bias(score, mask, bias):
    pads = (1, 4) if mask == "padding" else ()
    trace, params = toy(score=score, mask=mask, bias=bias, pad_positions=pads, pe="sinusoidal", seed=3)
    assert check_every_stage(trace, params) > 40


def test_toy_custom_mask_cross_attention_temperature_and_odd_sizes():
    n_q, n_k = 3, 10
    custom = np.random.default_rng(1).random((n_q, n_k)) < 0.4
    custom[2] = True  # an all-hidden row: weights 0, not NaN
    trace, params = toy(mask="custom", custom_mask=custom, cross_sentence="a dog barked", pe="sinusoidal",
                        heads=3, d_model=12, d_k=5, d_v=7, d_out=9, temperature=0.7, bias=True)  # fmt: skip
    assert "query_input" in trace
    check_every_stage(trace, params, seed=2)
    d = explain(trace, params, "masked", (0, 0, int(np.argmax(custom[0]))))
    assert "custom mask" in d.details["why"][0]
    row = explain(trace, params, "weights", (1, 2, 0))
    assert row.value == 0.0 and row.details["exp_sum"] == 0.0 and "every key" in row.formula


def test_toy_cross_attention_causal_and_exhaustive_small():
    trace, params = toy("one two three", mask="causal", cross_sentence="four five", heads=1, d_model=4)
    for stage in trace.names:
        for cell in np.ndindex(trace[stage].shape):
            check_derivation(explain(trace, params, stage, cell), trace)


def test_toy_embeddings_file_and_labels():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 8)).astype(np.float32)
    req = AttentionRequest(config=AttentionConfig(heads=2, d_model=8, pe="sinusoidal"), embeddings=x,
                           labels=("a", "b", "c", "d"), cross_embeddings=x[:2] * 2)  # fmt: skip
    trace, params = run(req), toy_params(req)
    check_every_stage(trace, params)
    d = explain(trace, params, "embeddings", (2, 3))
    assert "row 2 of the embeddings file" in d.text()


def test_explains_the_notes_quantities():
    trace, params = toy(mask="causal", pe="sinusoidal")
    d = explain(trace, params, "masked", (0, 2, 5))
    assert "j > i" in d.text() and "exactly 0" in d.text() and d.details["hidden"]
    w = explain(trace, params, "weights", (0, 3, 1))
    assert len(w.details["exponentials"]) == len(trace.key_tokens) and "sums to 1" in w.text()
    s = explain(trace, params, "scaled", (1, 3, 2))
    assert "√16" not in s.formula and "√8" in s.formula  # d_k = 16 / 2 heads
    pe = explain(trace, params, "positional_encoding", (3, 5))
    assert "cos(3 / 10000^(4/16))" in pe.formula
    e = explain(trace, params, "embeddings", (1, 0))
    assert "seeded with the seed (0) and the word alone" in e.text()
    c = explain(trace, params, "concat", (2, 11))
    assert c.details["head"] == 1 and c.details["column"] == 3
    q = explain(trace, params, "q", (1, 2, 3))
    assert len(q.sum_of) == 16  # no bias: d_model products


@pytest.mark.parametrize(
    ("stage", "cell", "message"),
    [
        ("nonsense", (0, 0), "unknown stage 'nonsense'"),
        ("masked", (0, 0, 0), "has no stage 'masked'"),
        ("scores", (0, 1), "indexed by 3 numbers"),
        ("scores", (0, 1, 99), "outside stage 'scores'"),
        ("output", (-1, 0), "outside stage 'output'"),
    ],
)
def test_bad_cells_are_one_line_input_errors(stage, cell, message):
    trace, params = toy()
    with pytest.raises(InputError, match=message) as info:
        explain(trace, params, stage, cell)
    assert "\n" not in str(info.value)


def test_json_is_strict_and_infinities_are_strings():
    trace, params = toy(mask="causal")
    d = explain(trace, params, "masked", (0, 0, 3))

    def refuse(constant):
        raise ValueError(constant)

    data = json.loads(d.to_json(), parse_constant=refuse)
    assert data["value"] == "-inf" and data["hidden"] is True and data["cell"] == [0, 0, 3]
    w = json.loads(explain(trace, params, "weights", (0, 1, 0)).to_json(), parse_constant=refuse)
    assert w["scores"][5] == "-inf" and w["exponentials"][5] == 0.0 and "exp_sum" in w


# --- pretrained models ------------------------------------------------------------------------------


def pretrained_case(model, sentence, layer, **kw):
    trace = model.trace(sentence, layer, **kw)
    params = pretrained_params(model, layer, len(trace.query_tokens), mask=trace.config["mask"],
                               pad_positions=trace.config["pad_positions"])  # fmt: skip
    return trace, params


def test_minilm_every_stage():
    from models.pretrained import load_model

    model = load_model("minilm", device="cpu")
    for layer, kw in ((0, {}), (3, {"mask": "padding", "pad_positions": (2,)}), (5, {"mask": "causal"})):
        trace, params = pretrained_case(model, "The cat sat on the mat.", layer, **kw)
        check_every_stage(trace, params, seed=layer)
    d = explain(trace, params, "input", (1, 0))
    assert d.details["token"] == trace.query_tokens[1] and d.details["id"] == trace.meta["token_ids"][1]
    assert len(explain(trace, params, "q", (0, 1, 0)).sum_of) == 384 + 1  # d_model products and the bias


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    import torch
    from test_pretrained_decoders import gpt2, llama, make_tokenizer

    from models.pretrained import load_model

    torch.manual_seed(0)
    out = {}
    for name, make, cls, bos in (
        ("gpt2", lambda v: gpt2(v), "GPT2Model", False),
        ("llama", lambda v: llama(v, attention_bias=True), "LlamaModel", True),
        ("llama-mqa", lambda v: llama(v, num_key_value_heads=1, head_dim=16), "LlamaModel", True),
    ):
        tok = make_tokenizer(bos=bos)
        model = getattr(transformers, cls)(make(tok.get_vocab_size())).eval()
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        tok.save(str(folder / "tokenizer.json"))
        out[name] = load_model(folder, device="cpu")
    return out


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama-mqa"])
def test_decoders_every_stage(decoders, name):
    model = decoders[name]
    for layer, kw in ((0, {}), (1, {"pad_positions": (3,)})):
        trace, params = pretrained_case(model, "the cat sat on the mat while a dog", layer, **kw)
        assert check_every_stage(trace, params, seed=layer) > 40
    if name.startswith("llama"):
        assert params.rope is not None and trace["k"].shape[0] == params.kv_heads < params.heads
        d = explain(trace, params, "q_rotated", (1, 4, 2))
        assert len(d.sum_of) == 2 and "θ = 4·ω_2" in d.text()
        s = explain(trace, params, "scores", (3, 5, 2))
        assert s.sum_of[0].label.startswith("q'_5,0·k'_2,0")
        assert params.b_q is not None if name == "llama" else params.b_q is None
    pad = explain(trace, params, "masked", (0, 6, 3))
    assert any("padding" in w for w in pad.details["why"])
