"""What-if edits of a traced pretrained layer (issue 9), against transformers' own modules.

For the bundled MiniLM (BERT), a random LLaMA with grouped-query attention and a random Qwen3
(qk-norm before the rotation): after editing one cell of the input, q, k, v, their norms and
rotations, the scores or the mask, every later stage equals pretrained_edit_refs.hf_stages (the
Hugging Face modules, step by step, with the edit applied where its stage is computed) to 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pretrained_edit_refs import SENTENCE, build_decoder, hf_stages, transformers

from models.config import InputError
from models.engine.edits import Edit, hide_key
from models.pretrained import list_models, load_model

LAYER = 1
MINILM = next((e.path for e in list_models() if e.name == "minilm"), None)

# (model, edits): cells inside every model's shapes (MiniLM 12 heads of 32; the decoders 4 query
# heads and 2 key/value heads of 8; 13 tokens or more)
CASES = {
    "input": [Edit("input", (2, 5), 2.5)],
    "q": [Edit("q", (1, 2, 3), 5.0)],
    "k-second-kv-head": [Edit("k", (1, 3, 0), -4.0)],
    "v": [Edit("v", (1, 1, 2), 3.0)],
    "scores": [Edit("scores", (2, 4, 1), 7.0)],
    "mask-hide": [hide_key(4, 2)],
    "mask-show-and-hide": [hide_key(1, 3, hidden=False), hide_key(5, 0)],
    "several": [
        Edit("q", (0, 6, 1), -2.0),
        Edit("q", (0, 6, 1), 3.0),
        Edit("v", (0, 2, 0), 1.5),
        Edit("scores", (3, 7, 7), -1.0),
    ],  # fmt: skip
}
DECODER_CASES = {
    "q_rotated": [Edit("q_rotated", (2, 5, 6), 4.0)],
    "k_rotated": [Edit("k_rotated", (0, 2, 7), -3.0)],
}
QK_NORM_CASES = {
    "q_normed": [Edit("q_normed", (3, 4, 2), 2.0)],
    "k_normed": [Edit("k_normed", (1, 0, 5), -2.0)],
}


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """name -> (our model, transformers' model)."""
    out = {}
    for kind in ("llama", "qwen3"):
        folder = tmp_path_factory.mktemp(kind)
        hf = build_decoder(folder, kind)
        out[kind] = (load_model(str(folder), device="cpu"), hf)
    if MINILM is not None:
        hf = transformers.AutoModel.from_pretrained(MINILM, attn_implementation="eager").eval()
        out["minilm"] = (load_model("minilm", device="cpu"), hf)
    return out


def _get(families, name):
    if name not in families:
        pytest.skip(f"{name} is not installed")
    return families[name]


def _cases():
    for name in ("minilm", "llama", "qwen3"):
        extra = {} if name == "minilm" else DECODER_CASES | (QK_NORM_CASES if name == "qwen3" else {})
        for case, edits in (CASES | extra).items():
            yield pytest.param(name, edits, id=f"{name}-{case}")


def close(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Equal to 1e-5, relative to the stage's largest finite value when that is above 1 (MiniLM's
    raw scores reach 40: float32 sums of 32 products in another order differ in the 6th digit)."""
    finite = np.abs(expected[np.isfinite(expected)])
    scale = max(1.0, float(finite.max()) if finite.size else 1.0)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * scale, err_msg=what)


def _arrays(trace) -> dict[str, np.ndarray]:
    return {s.name: s.array.copy() for s in trace.stages}


@pytest.mark.parametrize(("name", "edits"), list(_cases()))
def test_every_later_stage_follows_the_edit(families, name, edits):
    model, hf = _get(families, name)
    ids = model.encode(SENTENCE).ids
    trace = model.trace(SENTENCE, LAYER, edits=edits)
    reference = hf_stages(hf, LAYER, ids, edits)
    for stage, expected in reference.items():
        assert stage in trace, stage
        close(trace[stage].array, expected, stage)
    assert set(trace.names) - set(reference) <= {"softcapped"}  # every stage is checked
    last = {}
    for e in edits:
        last[(e.stage, e.cell)] = e.value
    for (stage, cell), value in last.items():  # the edited cell shows the number typed
        if stage != "mask":
            assert trace[stage].array[cell] == np.float32(value)
    original = model.trace(SENTENCE, LAYER)
    assert not np.array_equal(trace["output"].array, original["output"].array)  # the edit did something
    if all(e.stage != "input" for e in edits):  # the layers below are not touched
        assert np.array_equal(trace["input"].array, original["input"].array)
    assert trace.meta["edits"] == [e.to_json() for e in edits]


@pytest.mark.parametrize("name", ["minilm", "llama", "qwen3"])
def test_no_edits_is_the_same_trace_and_reset_gives_back_the_original_exactly(families, name):
    model, _ = _get(families, name)
    original = _arrays(model.trace(SENTENCE, LAYER))
    states = [s.clone() for s in model.cached_states]
    again = model.trace(SENTENCE, LAYER, edits=())
    assert "edits" not in again.meta
    assert _arrays(again).keys() == original.keys()
    assert all(np.array_equal(a, original[k]) for k, a in _arrays(again).items())
    every = [e for edits in CASES.values() for e in edits]
    edited = model.trace(SENTENCE, LAYER, edits=every)
    assert not np.array_equal(edited["weights"].array, original["weights"])
    # the cached hidden states were only read: the same objects with the same numbers
    assert len(model.cached_states) == len(states)
    assert all(torch.equal(a, b) for a, b in zip(model.cached_states, states, strict=True))
    reset = _arrays(model.trace(SENTENCE, LAYER))
    assert all(np.array_equal(a, original[k]) for k, a in reset.items())


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        ("llama", Edit("k", (2, 0, 0), 1.0), "edit of k: cell [2, 0, 0] is outside its shape [2, 13, 8]"),
        ("llama", Edit("q", (3, 13, 0), 1.0), "edit of q: cell [3, 13, 0] is outside its shape [4, 13, 8]"),
        ("llama", Edit("q", (1, 2), 1.0), "cell [1, 2] is outside its shape [4, 13, 8]"),
        ("llama", hide_key(0, 13), "edit of mask: cell [0, 13] is outside its shape [13, 13]"),
        ("llama", Edit("q_normed", (0, 0, 0), 1.0), "cannot edit stage 'q_normed'; editable: input, q, k, v,"),
        ("llama", Edit("embeddings", (0, 0), 1.0), "cannot edit stage 'embeddings'"),
        ("llama", Edit("weights", (0, 0, 0), 1.0), "cannot edit stage 'weights'"),
        ("llama", Edit("v", (0, 0, 0), float("inf")), "is not a finite float32 number"),
        ("minilm", Edit("q_rotated", (0, 0, 0), 1.0), "cannot edit stage 'q_rotated'"),
        ("minilm", Edit("input", (0, 384), 1.0), "edit of input: cell [0, 384] is outside its shape"),
    ],
)
def test_an_out_of_shape_edit_is_refused_with_one_line(families, name, edit, message):
    model, _ = _get(families, name)
    before = _arrays(model.trace(SENTENCE, LAYER))
    with pytest.raises(InputError) as info:
        model.trace(SENTENCE, LAYER, edits=[Edit("q", (0, 0, 0), 9.0), edit])
    assert message in str(info.value) and "\n" not in str(info.value)
    after = _arrays(model.trace(SENTENCE, LAYER))
    assert all(np.array_equal(a, before[k]) for k, a in after.items())


def test_a_mask_edit_shows_a_key_the_models_own_mask_hides(families):
    """Showing a key the causal mask hides lets the query see a later token, in this layer only."""
    model, hf = _get(families, "llama")
    edits = [hide_key(0, 5, hidden=False)]
    trace = model.trace(SENTENCE, LAYER, edits=edits)
    weights = trace["weights"].array  # (h, n, n)
    assert (weights[:, 0, 5] > 0).all() and (weights[:, 0, 6:] == 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1, rtol=1e-6)
    close(weights, hf_stages(hf, LAYER, model.encode(SENTENCE).ids, edits)["weights"])


def test_traced_hidden_is_the_layers_mask_with_the_mask_edits():
    """What Alt+click toggles on a model's layer: its causal mask, pads, a sliding window shorter than
    the sentence, and the mask edits so far (later ones win; cells outside are ignored)."""
    from models.pretrained.edits import traced_hidden

    config = {"mask": "causal", "pad_positions": [1], "sliding_window": 2}
    expected = np.triu(np.ones((5, 5), bool), 1) | np.tril(np.ones((5, 5), bool), -2)
    expected[:, 1] = True
    np.testing.assert_array_equal(traced_hidden(config, 5), expected)
    expected[4, 1], expected[0, 0] = False, True
    edits = [hide_key(4, 1), hide_key(4, 1, hidden=False), hide_key(0, 0), hide_key(9, 9), Edit("q", (0, 0, 0), 1.0)]
    np.testing.assert_array_equal(traced_hidden(config, 5, edits), expected)
    np.testing.assert_array_equal(traced_hidden({"mask": "none", "pad_positions": [1]}, 3), np.zeros((3, 3), bool))
