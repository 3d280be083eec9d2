"""Issue 23's decoders and ModernBERT, built at random with transformers, must match it layer by layer.

Each config exercises the family's own step: Gemma 3's sliding and global layers with their own
rotary bases and q/k norms; gpt-oss's learned sinks (made large, so that they take a real share of
every row), alternating windows and several experts per token; Phi's parallel branches, partial
rotary and qk LayerNorm; OPT's position offset, pre- and post-norm and projected embeddings;
Falcon's grouped key/value heads (new architecture) and multi-query layout; ModernBERT's local
(two-sided) and global layers. Every layer's attention weights and every hidden state are
compared with transformers' eager attention (``output_attentions=True``) to 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.pretrained import load_model

transformers = pytest.importorskip("transformers")
from test_pretrained_families import SENTENCE  # noqa: E402
from test_pretrained_families import build as build_case  # noqa: E402
from zoo import WINDOW, table  # noqa: E402

FAMILIES = table("test_pretrained_families_2")  # name: zoo Case (tests/models/zoo.py)


def build(folder, name, families=FAMILIES):
    """A random model of this table's case ``name`` in ``folder`` (test_families_2_explain builds with it)."""
    return build_case(folder, name, families)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_matches_transformers(tmp_path, name):
    model_type = FAMILIES[name][0]
    ref = build(tmp_path, name)
    model = load_model(tmp_path, device="cpu")
    assert model.model_type == model_type and model.num_layers == 3
    _, ids = model.tokenize(SENTENCE)
    n = len(ids)
    assert n > WINDOW + 2
    with torch.no_grad():
        out = ref(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for layer in range(model.num_layers):
        trace = model.trace(SENTENCE, layer)
        weights = trace["weights"].array
        sinks = trace.config["sinks"]
        assert weights.shape[-1] == n + sinks
        np.testing.assert_allclose(weights[..., :n], out.attentions[layer][0].numpy(), atol=1e-5, rtol=0)
        check_family_stages(name, trace, layer, n)
    states = model.hidden_states(SENTENCE)
    assert len(states) == len(out.hidden_states) == model.num_layers + 1
    for mine, theirs in zip(states, out.hidden_states):
        np.testing.assert_allclose(mine, theirs[0].numpy(), atol=1e-5, rtol=0)
    _, every, _ = model.layer_weights(SENTENCE)  # the model view: the real keys' weights
    for layer in range(model.num_layers):
        np.testing.assert_allclose(every[layer], out.attentions[layer][0].numpy(), atol=1e-5, rtol=0)


def window_hidden(n: int, w: int) -> np.ndarray:
    i = np.arange(n)
    return (i[:, None] - i[None, :]) >= w


def check_family_stages(name: str, trace, layer: int, n: int) -> None:
    """The family's own step shows as a stage, a column or in the mask where it changes the numbers."""
    masked = trace["masked"].array
    window = trace.config["sliding_window"]
    sliding = {
        "gemma3-types-softcap": layer != 1,
        "gemma3-pattern": layer % 2 == 0,
        "gpt_oss-sinks-moe": layer % 2 == 0,
    }.get(name, False)
    assert (window is not None) == sliding
    if sliding:
        hidden = window_hidden(n, window)
        assert hidden.any() and np.all(np.isneginf(masked[:, :, :n][:, hidden]))
        assert f"j ≤ i − {window} (window {window})" in trace["masked"].formula
    if name.startswith(("gemma3", "phi-qk")):
        assert trace.names.index("q_normed") < trace.names.index("q_rotated")
        assert not np.allclose(trace["q"].array, trace["q_normed"].array)
        if name.startswith("phi"):  # a LayerNorm: every head's vector centred
            np.testing.assert_allclose(trace["q_normed"].array.mean(-1), 0, atol=0.2)
            assert "LayerNorm" in trace["q_normed"].description
        else:
            assert "(1 + w)" in trace["q_normed"].formula
    else:
        assert "q_normed" not in trace
    if name.startswith("gemma3-types"):
        # transformers' Gemma 3 ignores attn_logit_softcapping: so does the explorer
        assert trace.config["softcap"] is None and trace.config["scale"] == pytest.approx(24**-0.5)
    if name.startswith("gpt_oss"):
        weights = trace["weights"].array
        assert trace["weights"].col_labels[-1] == "sink" and trace["scores"].col_labels[-1] == "sink"
        assert trace["masked"].shape == trace["scaled"].shape == weights.shape == (4, n, n + 1)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)  # the keys and the sink
        real = weights[..., :n].sum(-1)
        assert real.max() < 1 and real.min() < 0.9  # the sink takes a real share of the rows
        assert "s_h" in trace["weights"].formula and "less than 1" in trace["weights"].description
        # the head output reads only the real keys' weights
        v = trace["v"].array[list(trace.config["head_groups"])]  # (h, n, d_k)
        np.testing.assert_allclose(trace["head_output"].array, weights[..., :n] @ v, atol=1e-5)
    if name.startswith(("phi", "falcon-new")):
        rd, dk = trace.config["rotary_dim"], trace.config["d_k"]
        if name.startswith("phi"):
            assert rd < dk
            before = trace["q_normed" if "q_normed" in trace else "q"].array
            np.testing.assert_array_equal(before[..., rd:], trace["q_rotated"].array[..., rd:])
    if name == "falcon-new-gqa":
        assert trace.config["kv_heads"] == 2 and trace.config["head_groups"] == [0, 0, 1, 1]
    if name.startswith("falcon-multi"):
        assert trace.config["kv_heads"] == 1
    if name.startswith("modernbert"):
        local = trace.config["local_window"]
        assert (local is not None) == (layer > 0) and trace.config["mask"] == "padding"
        if local is not None:
            i = np.arange(n)
            far = np.abs(i[:, None] - i[None, :]) > local
            assert np.all(np.isneginf(masked[:, far])) and np.all(np.isfinite(masked[:, ~far]))
            assert f"|i − j| > {local}" in trace["masked"].formula
        else:
            assert np.all(np.isfinite(masked))
