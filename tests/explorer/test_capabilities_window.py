"""The window's capability in every family the registry names (the matrix of
tests/models/test_capabilities.py): the window's worker runs a request on one random model of each
family, answers with the trace and the shown stage's picture, and its weights are export's."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))  # the family zoo
from zoo import ZOO, build, first_case_of_each_family  # noqa: E402

from explorer.engine.worker import ComputeWorker  # noqa: E402
from models import api  # noqa: E402
from models.pretrained.loader import family_kind  # noqa: E402

pytest.importorskip("transformers")
SENTENCE, TARGET = "the cat sat on the mat while a dog", "a dog sat"


@pytest.fixture(scope="module")
def worker():
    w = ComputeWorker()
    yield w
    w.stop()


@pytest.mark.parametrize("name", first_case_of_each_family())
def test_the_window_shows_every_family(qtbot, worker, tmp_path, name):
    build(tmp_path, name)
    encdec = family_kind(ZOO[name][0]) == "encoder-decoder"
    settings = dict(sentence=SENTENCE, model=str(tmp_path), device="cpu")
    spec = api.runspec(**settings, **({"cross_sentence": TARGET, "block": "cross"} if encdec else {}))
    answers = []
    worker.result_ready.connect(answers.append)
    worker.failed.connect(lambda *args: answers.append(args))
    worker.submit(spec, focus_stage="weights")
    qtbot.waitUntil(lambda: bool(answers), timeout=60_000)
    display = answers[0]
    assert not isinstance(display, tuple), display  # a failure: (generation, message, kind)
    assert "weights" in display.images and display.images["weights"].indices.size > 0
    expected = api.trace_spec(spec).stage("weights")
    np.testing.assert_allclose(display.trace["weights"].array, expected, rtol=0, atol=1e-6, err_msg=name)


ENCDEC = [n for n in first_case_of_each_family() if family_kind(ZOO[n][0]) == "encoder-decoder"]


@pytest.mark.parametrize("name", ENCDEC)
def test_a_request_without_a_block_shows_the_default_block_as_export_does(qtbot, worker, tmp_path, name):
    """``api.runspec(model=<encoder-decoder>)`` without ``block``: the worker shows the block export
    picks (cross), not "unknown block None"."""
    build(tmp_path, name)
    spec = api.runspec(sentence=SENTENCE, model=str(tmp_path), device="cpu", cross_sentence=TARGET)
    answers = []
    worker.result_ready.connect(answers.append)
    worker.failed.connect(lambda *args: answers.append(args))
    worker.submit(spec, focus_stage="weights")
    qtbot.waitUntil(lambda: bool(answers), timeout=60_000)
    assert not isinstance(answers[0], tuple), answers[0]
    expected = api.trace_spec(spec).stage("weights")
    np.testing.assert_allclose(answers[0].trace["weights"].array, expected, rtol=0, atol=1e-6, err_msg=name)
