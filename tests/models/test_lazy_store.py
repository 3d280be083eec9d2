"""The lazy core: n×n stages computed per head and block of rows equal the whole-tensor maths
exactly, whatever is asked first; long inputs stream to disk without holding every head."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from engine_refs import causal_mask, padding_mask

import models.engine.pairs as pairs
from models.config import AttentionConfig, AttentionRequest
from models.engine import attention as att
from models.engine.pipeline import run
from models.engine.weights import random_weights

SENTENCE = "the quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat"


def eager(req: AttentionRequest) -> dict[str, np.ndarray]:
    """The stages computed on whole tensors, all heads at once, as the engine did before it was lazy."""
    cfg = req.config
    trace = run(req)
    w = random_weights(cfg)
    t = lambda a: None if a is None else torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    x = torch.from_numpy(trace["input"].array)
    xq = torch.from_numpy(trace["query_input"].array) if "query_input" in trace else x
    q = att.project(xq, t(w.W_q), t(w.b_q))
    k, v = att.project(x, t(w.W_k), t(w.b_k)), att.project(x, t(w.W_v), t(w.b_v))
    if cfg.score == "general":
        s = att.general_scores(q, k, t(w.extra["W_g"]))
    elif cfg.score == "additive":
        s = att.additive_scores(q, k, t(w.extra["W_1"]), t(w.extra["W_2"]), t(w.extra["w"]))
    else:
        s = att.dot_scores(q, k)
    out = {"scores": s}
    if cfg.score == "scaled":
        s = out["scaled"] = att.scale(s, cfg.head_dim_k)
    n_q, n_k = q.shape[1], k.shape[1]
    hidden = {"causal": lambda: causal_mask(n_q, n_k),
              "padding": lambda: padding_mask(n_q, n_k, cfg.pad_positions),
              "custom": lambda: torch.as_tensor(req.custom_mask)}.get(cfg.mask)  # fmt: skip
    if hidden is not None:
        s = out["masked"] = att.apply_mask(s, hidden())
    a = out["weights"] = att.softmax(s, cfg.temperature)
    o = out["head_output"] = att.weighted_sum(a, v)
    out["output"] = att.output_projection(att.concat_heads(o), t(w.W_o), t(w.b_o))
    return {name: value.numpy() for name, value in out.items()}


CASES = [
    dict(mask="none", score="scaled"),
    dict(mask="causal", score="dot", temperature=0.3),
    dict(mask="padding", pad_positions=(0, 3, 7), score="general"),
    dict(mask="custom", score="additive"),
    dict(mask="causal", score="scaled", pe="sinusoidal", bias=True),
]


@pytest.mark.parametrize("options", CASES, ids=lambda o: f"{o['mask']}-{o['score']}")
@pytest.mark.parametrize("cross", [False, True])
def test_lazy_stages_equal_the_whole_tensor_maths(monkeypatch, options, cross):
    monkeypatch.setattr(pairs, "BLOCK_BYTES", 4 * 17 * 5)  # several blocks of 8 rows
    cfg = AttentionConfig(heads=4, d_model=16, seed=3, **options)
    cross_sentence = "a small second sentence for the queries here now" if cross else None
    n_q = 9 if cross else 17
    rng = np.random.default_rng(0)
    custom = rng.random((n_q, 17)) < 0.3 if options["mask"] == "custom" else None
    if custom is not None:
        custom[2] = True  # a row with every key hidden: zero weights, never NaN
    req = AttentionRequest(config=cfg, sentence=SENTENCE, cross_sentence=cross_sentence, custom_mask=custom)
    reference = eager(req)
    trace = run(req)
    assert trace["weights"].store.blocks > 1 or n_q <= 8
    for name, expected in reference.items():
        stage = trace[name]
        # Ask in a scattered order: a tile first, then single heads, then everything; the lazy
        # answers agree exactly with one another, and with the whole-tensor maths to float rounding.
        if stage.store is not None:
            tile, cell = stage.rows(1, 3, 12).copy(), stage.cell(2, 5, 4)
            np.testing.assert_allclose(tile, expected[1, 3:12], rtol=1e-6, atol=1e-6)
            heads = [stage.head(h).copy() for h in range(expected.shape[0])]
            np.testing.assert_array_equal(tile, heads[1][3:12])
            assert cell == heads[2][5, 4] or (np.isneginf(cell) and np.isneginf(heads[2][5, 4]))
            np.testing.assert_array_equal(stage.array, np.stack(heads))
        np.testing.assert_allclose(stage.array, expected, rtol=1e-6, atol=1e-6)
    weights = trace["weights"].array
    assert np.isfinite(weights).all()
    if custom is not None:
        assert (weights[:, 2] == 0).all()


def test_pair_stages_are_exact_bit_for_bit_across_blocks(monkeypatch):
    # The same fixed blocks whatever is asked: a tile equals the slice of the whole head exactly.
    monkeypatch.setattr(pairs, "BLOCK_BYTES", 4 * 17 * 5)
    trace = run(AttentionRequest(config=AttentionConfig(heads=2, d_model=16, mask="causal"), sentence=SENTENCE))
    for name in ("scores", "scaled", "masked", "weights"):
        whole = trace[name].head(1).copy()
        trace[name].store.clear()
        np.testing.assert_array_equal(trace[name].rows(1, 5, 14), whole[5:14])


def test_the_budget_bounds_what_a_long_input_keeps(monkeypatch):
    monkeypatch.setattr(pairs, "DEFAULT_BUDGET", 8 << 20)
    cfg = AttentionConfig(heads=4, d_model=32, mask="causal")
    trace = run(AttentionRequest(config=cfg, sentence=" ".join(f"w{i}" for i in range(2048))))
    for h in range(4):
        trace["weights"].head(h)
    assert trace["weights"].store.cached_bytes <= 8 << 20
    assert trace.nbytes < 16 << 20  # 4 × 2048² floats (64 MiB) were computed, a budget's worth kept


def test_export_of_16384_tokens_streams_one_head(tmp_path):
    # One head of 16,384² weights (1 GiB) written block by block: the process never holds it whole.
    out = tmp_path / "long"
    code = (
        "import sys; from models.cli.export import export_main; "
        "rc = export_main(sys.argv[1:]); "  # VmHWM, not ru_maxrss (which a forked child inherits)
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]); sys.exit(rc)"
    )
    sentence = " ".join(f"w{i % 3000}" for i in range(16384))
    args = ["--sentence", sentence, "--heads", "8", "--d-model", "64", "--mask", "causal",
            "--stages", "weights", "--only-heads", "2", "--out", str(out)]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stdout.strip().splitlines()[-1])
    assert peak_kib < 1_000_000  # well under the 1 GiB the head alone would take, let alone 8 heads
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(s["name"], s["shape"], s["heads"]) for s in manifest["stages"]] == [("weights", [1, 16384, 16384], [2])]
    weights = np.load(out / "weights.npy", mmap_mode="r")
    assert weights.shape == (1, 16384, 16384)
    for row in (0, 1, 8191, 16383):
        assert abs(float(weights[0, row, : row + 1].sum()) - 1.0) < 1e-4
        assert not weights[0, row, row + 1 :].any()  # causal: exactly 0 above the diagonal


def test_a_decoder_traces_16384_tokens(tmp_path):
    # Regression: the memory estimate counted every n×n tensor whole (32 GiB at 16,384 tokens) and
    # refused; the traced layer is lazy and the layers below run fused.
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    from models.pretrained import load_model

    words = [f"w{i}" for i in range(50)]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    config = transformers.LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=16384)  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaModel(config).eval().save_pretrained(tmp_path)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    trace = load_model(tmp_path, device="cpu").trace(" ".join(words[i % 50] for i in range(16384)), 1)
    weights = trace["weights"]
    assert weights.shape == (4, 16384, 16384) and weights.lazy
    row = weights.rows(3, 16383, 16384)[0]
    assert abs(float(row.sum()) - 1.0) < 1e-4
    first = weights.rows(0, 0, 1)[0]
    assert first[0] == 1.0 and not first[1:].any()  # causal: the first token sees only itself


@pytest.mark.parametrize("mask", ["causal", "none"])
def test_peaks_of_weights_beyond_the_budget_read_only_the_keys_each_block_sees(mask):
    """Past the budget the display's reduction computes each block only up to the last key its
    queries see (never expanded to every key, which took half of a 16,384-token pass): the
    peaks are those of the whole matrix, exactly."""
    from models.engine.reduce import reduce_head

    n, k = 2304, 8  # > 4 M cells a head: the weights' fast path (no minimum pass)
    req = AttentionRequest(config=AttentionConfig(heads=2, d_model=8, mask=mask, seed=1),
                           sentence=" ".join(f"w{i}" for i in range(n)))  # fmt: skip
    stage = run(req)["weights"]
    store = stage.store
    whole = stage.head(1).copy()
    expected = whole.reshape(n // k, k, n // k, k).max(axis=(1, 3))
    fits = reduce_head(stage, 1, max_side=n // k, signed=False)  # the stage fits: whole cached blocks
    np.testing.assert_array_equal(fits.peak, expected)
    store.budget = 1  # now it does not
    store.clear()
    expanded = []
    store.on_compute = lambda *a: expanded.append(a)
    beyond = reduce_head(stage, 1, max_side=n // k, signed=False)
    np.testing.assert_array_equal(beyond.peak, expected)
    assert beyond.finite_range[1] == fits.finite_range[1] == float(whole.max())
    rows = store.block_rows
    whole_rows = [b for b in range(store.blocks)  # blocks whose queries see every key
                  if store.spec.mask.visible_columns(b * rows, min(n, b * rows + rows), n) == (0, n)]  # fmt: skip
    assert [block for _name, _head, block in expanded] == whole_rows  # no other block computed to every key
    assert store.blocks > len(whole_rows) or mask == "none"
