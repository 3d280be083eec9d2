"""Encoder-decoder families (t5, mt5, bart, marian) against transformers' eager attention.

Each family is built at random with transformers (tests/models/encdec_refs.py), saved, loaded with
models.pretrained, and ONE forward pass with the target's ids as decoder input ids (as BertViz does)
gives the reference: every layer's encoder, decoder and cross attentions and both stacks' hidden
states must agree to 1e-5. T5's relative buckets reach past ``relative_attention_max_distance``.
"""

from __future__ import annotations

import numpy as np
import pytest

from models.config import InputError
from models.engine.stages import STAGE_ORDER
from models.pretrained import load_model

transformers = pytest.importorskip("transformers")
from encdec_refs import FAMILIES, SOURCE, TARGET, build, reference  # noqa: E402

TOL = 1e-5


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    ref_model, tok = build(folder, request.param)
    return request.param, load_model(folder, device="cpu"), reference(ref_model, tok), tok


def test_every_layer_of_every_block_matches_transformers(family):
    name, model, out, _ = family
    for block, refs in (("encoder", out.encoder_attentions), ("decoder", out.decoder_attentions),
                        ("cross", out.cross_attentions)):  # fmt: skip
        assert model.block_layers(block) == len(refs)
        for layer, ref in enumerate(refs):
            trace = model.trace(SOURCE, layer, cross_sentence=TARGET, block=block)
            np.testing.assert_allclose(trace["weights"].array, ref[0].numpy(), atol=TOL,
                                       err_msg=f"{name} {block} L{layer}")
            assert trace.config["block"] == block and trace.config["layer"] == layer


def test_layer_outputs_match_transformers(family):
    name, model, out, _ = family
    states = model.hidden_states(SOURCE, TARGET)
    for side, refs in (("encoder", out.encoder_hidden_states), ("decoder", out.decoder_hidden_states)):
        assert len(states[side]) == len(refs)
        for layer, (ours, ref) in enumerate(zip(states[side], refs)):
            np.testing.assert_allclose(ours, ref[0].numpy(), atol=TOL, err_msg=f"{name} {side} state {layer}")
    np.testing.assert_allclose(states["encoder"][-1], out.encoder_last_hidden_state[0].numpy(), atol=TOL)


def test_all_layers_of_a_block_in_one_pass_equal_the_traces(family):
    _, model, out, _ = family
    for block, refs in (("encoder", out.encoder_attentions), ("cross", out.cross_attentions),
                        ("decoder", out.decoder_attentions)):  # fmt: skip
        q_enc, k_enc, weights, _ = model.layer_weights(SOURCE, cross_sentence=TARGET, block=block)
        assert weights.shape == (len(refs), *refs[0][0].shape)
        for layer, ref in enumerate(refs):
            np.testing.assert_allclose(weights[layer], ref[0].numpy(), atol=TOL)


def test_cross_block_has_the_toys_stage_names(family):
    name, model, _, tok = family
    trace = model.trace(SOURCE, 0, cross_sentence=TARGET)  # the default block: cross
    names = [s.name for s in trace.stages]
    assert names[:5] == ["input", "query_input", "q", "k", "v"]
    assert set(names) <= set(STAGE_ORDER) and "weights" in names
    assert trace.query_tokens == tuple(tok.encode(TARGET).tokens)  # the target's tokens, as the tokenizer encodes it
    assert trace.key_tokens == tuple(tok.encode(SOURCE).tokens)
    assert trace["q"].shape[1] == len(trace.query_tokens) and trace["k"].shape[1] == len(trace.key_tokens)
    assert "biased" not in names  # T5's cross attention has no position bias
    assert ("scaled" in names) == (not name.startswith(("t5", "mt5")))  # T5 does not scale
    np.testing.assert_allclose(trace["weights"].array.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(trace["output"].array.shape, (len(trace.query_tokens), model.hidden_size))


def test_decoder_block_is_causal_and_t5_adds_its_position_bias(family):
    name, model, _, _ = family
    trace = model.trace(SOURCE, 0, cross_sentence=TARGET, block="decoder")
    w = trace["weights"].array
    assert np.all(np.triu(w, 1) == 0) and trace.config["mask"] == "causal"
    enc = model.trace(SOURCE, 1, cross_sentence=TARGET, block="encoder")
    if name.startswith(("t5", "mt5")):
        bias = enc["biased"].array - enc["scores"].array  # the same table in every layer of the stack
        assert np.abs(bias).max() > 0.01
        n = len(enc.key_tokens)
        assert n > model.arch.max_distance  # buckets beyond the max distance are exercised
        # distances past max_distance share one bucket: equal bias along those diagonals
        far = model.arch.max_distance + 1
        np.testing.assert_allclose(bias[:, 0, far], bias[:, 0, n - 1], atol=1e-5)
    else:
        assert "biased" not in [s.name for s in enc.stages]


def test_t5_tokens_end_with_eos_and_take_no_decoder_start(family):
    name, model, _, _ = family
    trace = model.trace(SOURCE, 0, cross_sentence=TARGET)
    assert trace.query_tokens[-1] == "</s>" and trace.key_tokens[-1] == "</s>"
    if name.startswith(("t5", "mt5")):
        assert trace.query_tokens[0] == "die"  # no <pad> decoder start token prepended
    else:
        assert trace.query_tokens[0] == "<s>"


def test_what_is_not_reproduced_is_refused_by_name(family):
    name, model, _, _ = family
    with pytest.raises(InputError, match="cross-sentence"):
        model.trace(SOURCE, 0)
    with pytest.raises(InputError, match="unknown block 'middle'"):
        model.trace(SOURCE, 0, cross_sentence=TARGET, block="middle")
    with pytest.raises(InputError, match=f"{model.model_type} model: only the model's own masks"):
        model.trace(SOURCE, 0, cross_sentence=TARGET, mask="none")
    with pytest.raises(InputError, match="pad positions are not supported"):
        model.trace(SOURCE, 0, cross_sentence=TARGET, pad_positions=(1,))
    with pytest.raises(InputError, match="decoder block has"):
        model.trace(SOURCE, model.block_layers("decoder"), cross_sentence=TARGET, block="decoder")
    with pytest.raises(InputError, match="target sentence is empty"):
        model.trace(SOURCE, 0, cross_sentence="  ")


def test_a_big_checkpoint_reads_only_the_layers_a_block_needs(tmp_path, monkeypatch):
    from models.pretrained import loader

    monkeypatch.setattr(loader, "PRELOAD_FILE_BYTES", 0)  # as if the checkpoint were big
    ref_model, tok = build(tmp_path, "t5")  # 2 encoder layers (stored 0, 1), 3 decoder layers (2, 3, 4)
    out = reference(ref_model, tok)
    model = load_model(tmp_path, device="cpu")
    store = model.arch.layers
    assert not any(store.cached(i) for i in range(5))
    progress = []
    model.progress = lambda fraction, message: progress.append(message)
    trace = model.trace(SOURCE, 0, cross_sentence=TARGET, block="encoder")
    assert [store.cached(i) for i in range(5)] == [True, False, False, False, False]  # encoder layer 0 only
    assert progress and progress[-1].startswith("Read ")
    np.testing.assert_allclose(trace["weights"].array, out.encoder_attentions[0][0].numpy(), atol=TOL)
    trace = model.trace(SOURCE, 1, cross_sentence=TARGET, block="cross")
    assert [store.cached(i) for i in range(5)] == [True, True, True, True, False]  # the encoder, decoder 0-1
    np.testing.assert_allclose(trace["weights"].array, out.cross_attentions[1][0].numpy(), atol=TOL)


def test_a_sentencepiece_style_tokenizer_as_t5_ships_it(tmp_path):
    from encdec_refs import make_unigram_tokenizer

    ref_model, tok = build(tmp_path, "t5-v1_1-gated", make_unigram_tokenizer())
    out = reference(ref_model, tok)
    model = load_model(tmp_path, device="cpu")
    trace = model.trace(SOURCE, 1, cross_sentence=TARGET)
    assert trace.key_tokens == tuple(tok.encode(SOURCE).tokens) and trace.key_tokens[-1] == "</s>"
    assert trace.key_tokens[0].startswith("▁") and trace.query_tokens[0].startswith("▁")
    np.testing.assert_allclose(trace["weights"].array, out.cross_attentions[1][0].numpy(), atol=TOL)
