"""Issue 23's families through the rest of the app: every cell explains itself, gpt-oss's sink
column is explained, exported and read back with its label, hostile configs are one-line errors,
and a big checkpoint of a MoE family reads only the layers a trace needs."""

import json

import numpy as np
import pytest
from test_pretrained_families_2 import FAMILIES, SENTENCE, build

from models.config import InputError
from models.files.attention_file import open_attention
from models.files.export import write_trace
from models.pretrained import load_model, loader
from models.reads.explain import explain
from models.reads.params import pretrained_params

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``built(name)``: the folder of one small random model per family, built once."""
    folders = {}

    def get(name: str):
        if name not in folders:
            folders[name] = tmp_path_factory.mktemp(name)
            build(folders[name], name)
        return folders[name]

    return get


def check_cell(trace, params, stage, cell):
    d = explain(trace, params, stage.name, cell)
    value = float(stage.array[cell])
    assert d.value == value or (np.isneginf(d.value) and np.isneginf(value)), (stage.name, cell)
    if d.sum_of and np.isfinite(value):
        terms = np.array([t.value for t in d.sum_of], dtype=np.float64)
        tolerance = 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(terms).sum()))
        assert abs(terms.sum() - value) <= tolerance, (stage.name, cell, terms.sum(), value)
    return d


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_stage_of_every_family_explains_itself(built, name):
    model = load_model(built(name), device="cpu")
    rng = np.random.default_rng(0)
    for layer in (0, 1):
        trace = model.trace(SENTENCE, layer)
        n = len(trace.query_tokens)
        params = pretrained_params(model, layer, n, trace.config["mask"], trace.config["pad_positions"])
        for stage in trace.stages:
            for _ in range(3):
                check_cell(trace, params, stage, tuple(int(rng.integers(0, s)) for s in stage.shape))
            if stage.per_head and stage.col_axis == "key":  # the last column: the sink, for gpt-oss
                check_cell(trace, params, stage, (1, n - 1, stage.shape[-1] - 1))


def test_the_sink_is_explained_and_in_the_denominator(built):
    model = load_model(built("gpt_oss-sinks-moe"), device="cpu")
    trace = model.trace(SENTENCE, 0)
    n = len(trace.query_tokens)
    params = pretrained_params(model, 0, n)
    sinks = model.arch.layers[0]["sinks"].numpy()
    for stage in ("scores", "scaled", "masked"):
        d = check_cell(trace, params, trace[stage], (2, 5, n))
        assert d.value == pytest.approx(float(sinks[2])) and "sink" in d.title.lower()
        assert "s_2" in d.formula and "neither scaled nor masked" in " ".join(d.steps)
    d = check_cell(trace, params, trace["weights"], (2, 5, 3))
    e = d.details["exponentials"]
    assert len(e) == n + 1 and e[-1] > 0  # the sink's exponential is part of the sum
    assert d.details["exp_sum"] == pytest.approx(float(e.sum()))
    assert "sink" in " ".join(d.steps) and "sum to 1 −" in " ".join(d.steps)
    d = check_cell(trace, params, trace["weights"], (2, 5, n))
    assert d.title.endswith(f"'sink' ({n})")
    d = check_cell(trace, params, trace["head_output"], (2, 5, 1))
    assert len(d.sum_of) == n and "less than 1" in " ".join(d.steps)  # the keys only


def test_an_export_keeps_the_sink_column_and_its_label(built, tmp_path):
    model = load_model(built("gpt_oss-sinks-moe"), device="cpu")
    trace = model.trace(SENTENCE, 0)
    n = len(trace.query_tokens)
    out = write_trace(trace, tmp_path / "export")
    manifest = json.loads((out / "manifest.json").read_text())
    entries = {s["name"]: s for s in manifest["stages"]}
    for name in ("scores", "scaled", "masked", "weights"):
        assert entries[name]["shape"] == [4, n, n + 1] and entries[name]["col_labels"][-1] == "sink"
        assert np.load(out / f"{name}.npy").shape == (4, n, n + 1)
    assert "col_labels" not in entries["q"] and manifest["config"]["sinks"] is True
    np.testing.assert_array_equal(np.load(out / "weights.npy"), trace["weights"].array)
    opened = open_attention(out)  # read back as an attention file: the sink keeps its label
    assert opened.key_tokens[-1] == "sink" and len(opened.key_tokens) == n + 1 and not opened.warnings


def _altered(src, dst, **values):
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "config.json":
            (dst / f.name).symlink_to(f)
    cfg = {**json.loads((src / "config.json").read_text()), **values}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


CASES = {
    "gpt_oss-dynamic": ("gpt_oss-sinks-moe", dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0}),
                        "gpt_oss model: unsupported rope type 'dynamic' (it cannot be reproduced exactly); "
                        "supported: default, linear, llama3, yarn"),
    "gpt_oss-yarn-length": ("gpt_oss-sinks-moe", dict(rope_parameters={"rope_type": "yarn", "factor": 4.0}),
                            "rope type 'yarn' needs 'original_max_position_embeddings'"),
    "gpt_oss-top-k": ("gpt_oss-sinks-moe", dict(num_experts_per_tok=9), "num_experts_per_tok 9 exceeds"),
    "gemma3-pattern-text": ("gemma3-pattern", dict(sliding_window_pattern="2", layer_types=None),
                            "sliding_window_pattern must be a positive integer"),
    "gemma3-bidirectional": ("gemma3-pattern", dict(use_bidirectional_attention=True),
                             "gemma3_text model: use_bidirectional_attention is not supported"),
    "gemma3-layer-type": ("gemma3-pattern", dict(layer_types=["chunked_attention"] * 3),
                          "unsupported layer type 'chunked_attention'"),
    "phi-qk-text": ("phi-qk-layernorm", dict(qk_layernorm="yes"), "qk_layernorm must be true or false"),
    "opt-act": ("opt-prenorm", dict(activation_function="softplus"), "unsupported activation 'softplus'"),
    "falcon-alibi-text": ("falcon-new-gqa", dict(alibi="yes"), "alibi must be true or false"),
    "falcon-kv": ("falcon-new-gqa", dict(num_kv_heads=3), "4 query heads cannot share 3 key/value heads"),
    "modernbert-types": ("modernbert-local-global", dict(layer_types=["full_attention"]),
                         "layer_types must list 3 layers"),
    "modernbert-local": ("modernbert-local-global", dict(local_attention=0), "local_attention must be a positive"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_configs_are_one_line_errors(built, tmp_path, case):
    name, values, message = CASES[case]
    folder = _altered(built(name), tmp_path / "m", **values)
    with pytest.raises(InputError) as info:
        load_model(folder, device="cpu")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_big_moe_checkpoint_reads_only_the_layers_a_trace_needs(built, monkeypatch):
    monkeypatch.setattr(loader, "PRELOAD_FILE_BYTES", 0)  # as if the checkpoint were big
    model = load_model(built("gpt_oss-sinks-moe"), device="cpu")
    store = model.arch.layers
    assert store.reads == 0
    model.trace(SENTENCE, 1)
    assert store.reads == 2 and not store.cached(2)  # layer L reads layers ≤ L only


def test_one_query_row_reads_the_sink_but_mixes_only_the_keys(built):
    from models.engine.trace import query_row

    model = load_model(built("gpt_oss-sinks-moe"), device="cpu")
    trace = model.trace(SENTENCE, 2)
    n = len(trace.query_tokens)
    a, o = query_row(trace, 3, n - 1)  # before the head outputs are computed: from the value rows
    assert a.shape == (n + 1,) and a[-1] > 0
    np.testing.assert_allclose(o, trace["head_output"].array[3, n - 1], atol=1e-5)


def test_the_window_knows_which_keys_a_local_layer_hides(built):
    from models.pretrained.edits import traced_hidden

    model = load_model(built("modernbert-local-global"), device="cpu")
    trace = model.trace(SENTENCE, 1)  # a local layer: ±2 keys
    n = len(trace.query_tokens)
    hidden = traced_hidden(trace.config, n)
    np.testing.assert_array_equal(hidden, np.isneginf(trace["masked"].array[0]))
    assert hidden.any() and not hidden[5, 3:8].any()


def test_mxfp4_experts_are_refused_by_name(built, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = _altered(built("gpt_oss-sinks-moe"), tmp_path / "m")
    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    key = next(k for k in tensors if k.endswith("layers.0.mlp.experts.gate_up_proj"))
    tensors[key + "_blocks"] = tensors.pop(key)
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(InputError, match="gpt_oss model: MXFP4-quantized experts are not supported"):
        load_model(folder, device="cpu")
