"""``why`` reads the model that made a trace again on the trace's device, with its layers in the
trace's ``--dtype`` (issue 45: every read runs where the numbers are). It loaded it on the CPU in
float32 whatever the trace said: a trace made on a card was split on the CPU, and one made with
``--dtype bfloat16`` from layers below that did not give its input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from zoo import build_own, cases

from models.config import InputError
from models.pretrained import load_model
from models.reads.why import model_of, why

pytest.importorskip("transformers")

SENTENCE = "the cat sat on the mat while a dog was walking"
ONE_OF_EACH_KIND = [cases("decoder")[0], cases("encoder-decoder")[0]]


@pytest.mark.parametrize("name", ONE_OF_EACH_KIND)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_model_is_read_again_on_the_traces_device_and_dtype(tmp_path, device, name, dtype):
    build_own(tmp_path, name)
    model = load_model(tmp_path, device=device, dtype=dtype)
    extra = {"cross_sentence": "a dog ran in the park"} if getattr(model, "encoder_decoder", False) else {}
    trace = model.trace(SENTENCE, model.num_layers - 1, **extra)
    assert trace.meta["layers_dtype"] == dtype and trace.config["dtype"] == "float32"
    again = model_of(trace)
    assert again.device.type == device and again.arch.layers.residency().dtype == dtype


def test_a_split_without_the_model_equals_one_with_it(tmp_path, device):
    torch.manual_seed(0)
    build_own(tmp_path, cases("decoder")[0])
    model = load_model(tmp_path, device=device)
    trace = model.trace(SENTENCE, model.num_layers - 1)
    n = len(trace.query_tokens)
    given, read = why(trace, 0, n - 1, 1, model=model), why(trace, 0, n - 1, 1)
    assert read["query_sources"] == given["query_sources"]
    np.testing.assert_allclose(read["table"], given["table"], rtol=0, atol=1e-6 * np.abs(given["table"]).max())
    assert abs(np.sum(read["table"]) - read["score"]) <= 1e-5 * np.abs(read["table"]).sum()


def test_a_bfloat16_trace_is_refused_with_its_reason(tmp_path):
    """The split is exact in float64 on the float32 weights; the layers below a ``--dtype bfloat16``
    trace ran in bfloat16, so its input is not their sum: refused, saying so (before: only "the layers
    below do not give this trace's input")."""
    build_own(tmp_path, cases("decoder")[0])
    model = load_model(tmp_path, device="cpu", dtype="bfloat16")
    trace = model.trace(SENTENCE, model.num_layers - 1)
    with pytest.raises(InputError, match="ran in bfloat16.*--dtype float32"):
        why(trace, 0, 3, 1)
