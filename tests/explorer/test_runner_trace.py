"""The window's runner traces a model's RunSpec with the same mapping as ``export`` (models.run_engine.model_trace):
every option of the spec reaches ``model.trace`` (the runner dropped ``max_tokens``: a spec asking for
4 tokens showed the whole sentence)."""

from __future__ import annotations

import numpy as np

from explorer.engine.pretrained_runner import PretrainedRunner
from models import api
from models.runspec import RunSpec

SENTENCE = "The animal didn't cross the street because it was too tired."


def test_the_runner_traces_what_export_traces_max_tokens_included():
    spec = RunSpec(model="minilm", sentence=SENTENCE, layer=1, max_tokens=4, device="cpu").validate()
    runner = PretrainedRunner()
    shown = runner(spec, lambda: False)
    written = api.trace_spec(spec, runner.model("minilm", "cpu")).raw
    assert len(written.key_tokens) == 4  # export: the token limit
    assert tuple(shown.key_tokens) == tuple(written.key_tokens)
    np.testing.assert_allclose(shown["weights"].array, written["weights"].array, atol=1e-6)


def test_the_window_spec_of_a_model_keeps_its_second_sentence_unused():
    """The window's RunSpec of a model holds the second sentence (an encoder-decoder's target); another
    model traces without it, as before the runner took export's mapping."""
    spec = RunSpec(model="minilm", sentence="a b c", cross_sentence="x y", exact=False, device="cpu")
    trace = PretrainedRunner()(spec, lambda: False)
    assert tuple(trace.key_tokens) == ("[CLS]", "a", "b", "c", "[SEP]")
