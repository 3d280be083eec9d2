"""The runner keeps the small models a training timeline visits (forty folders of 0.2 MB) besides the
two big ones it keeps, and reads a small one without waiting for the GUI's turn."""

from __future__ import annotations

from explorer.engine.pretrained_runner import MODELS_KEPT, PretrainedRunner
from models.pretrained.steps import checkpoint_steps
from tests.models.test_induction_model import SHIPPED


def test_small_models_stay_and_do_not_wait_for_the_gui():
    waits = []
    runner = PretrainedRunner(before_load=lambda: waits.append(1))
    steps = list(checkpoint_steps(SHIPPED).values())[:MODELS_KEPT + 4]
    for folder in steps * 2:  # back and forth over more steps than MODELS_KEPT
        runner.model(str(folder), device="cpu")
    assert runner.loads == len(steps)  # each read once: none was dropped for the next
    assert waits == []
    runner.model("minilm", device="cpu")  # a big model: the worker lets the GUI finish its turn first
    assert waits == [1] and runner.loads == len(steps) + 1
