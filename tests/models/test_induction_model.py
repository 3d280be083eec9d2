"""The shipped ``induction`` model (resources/models/induction, ``python main.py train --seed 0``):
transformers reads it and agrees with the explorer, its heads score as docs/induction.md says,
and training again reproduces its first checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from models.pretrained import list_models, load_model, resolve_model
from models.pretrained.steps import checkpoint_steps
from models.reads.survey import all_layer_weights
from models.training.data import repeated_block
from models.training.scores import head_scores
from models.training.train import TrainConfig, train

transformers = pytest.importorskip("transformers")
SHIPPED = Path(__file__).resolve().parents[2] / "resources" / "models" / "induction"
SENTENCES = (repeated_block(), "the cat sat on the mat. the cat sat on the mat.")


def scores(step: str | None = None) -> dict[str, np.ndarray]:
    tokens, A = all_layer_weights(load_model("induction", step=step), repeated_block())
    return head_scores(A, tokens)


def test_shipped_model_is_found_by_name_and_listed():
    assert resolve_model("induction") == SHIPPED
    assert ("induction", "llama") in [(e.name, e.model_type) for e in list_models()]
    assert len(checkpoint_steps(SHIPPED)) == 40
    size = sum(f.stat().st_size for f in SHIPPED.rglob("*") if f.is_file())
    assert size <= 10 * 1024 * 1024


@pytest.mark.parametrize("step", [None, "first"])
def test_transformers_attention_equals_the_explorer_trace(step):
    folder = SHIPPED if step is None else next(iter(checkpoint_steps(SHIPPED).values()))
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    ours = load_model("induction", step=step)
    for sentence in SENTENCES:
        ids = tok(sentence, return_tensors="pt")["input_ids"]
        assert ids[0].tolist() == list(ours.encode(sentence).ids)
        with torch.no_grad():
            theirs = hf(ids, output_attentions=True).attentions
        _, A = all_layer_weights(ours, sentence)
        for layer in range(ours.num_layers):
            np.testing.assert_allclose(A[layer], theirs[layer][0].numpy(), atol=1e-5)
        trace = ours.trace(sentence, 1)
        np.testing.assert_allclose(trace["weights"].array, theirs[1][0].numpy(), atol=1e-5)


def test_final_step_has_a_previous_token_head_in_layer_0():
    assert scores()["previous"][0].max() >= 0.8


def test_no_induction_head_at_step_0():
    assert scores("first")["induction"].max() < 0.2


def test_final_step_has_an_induction_head_in_layer_1():
    assert scores()["induction"][1].max() >= 0.8


def test_phase_change_the_docs_describe():
    """The repeated-block loss falls between the checkpoints docs/induction.md names, and the
    induction score jumps at the same steps: below 0.2 before, at least 0.5 after."""
    from models.training.checkpoints import read_losses

    rows = {r["step"]: r["heldout_repeated_loss"] for r in read_losses(SHIPPED / "losses.csv")}
    assert rows[583] > 3.5 and rows[839] < 1.5
    assert scores("583")["induction"][1].max() < 0.2
    assert scores("1007")["induction"][1].max() >= 0.5
    final = scores()
    assert final["previous"][0].argmax() == 0 and final["induction"][1].argmax() == 0  # L0 H0, L1 H0


def test_first_steps_retrain_exactly(tmp_path):
    info = json.loads((SHIPPED / "training.json").read_text())
    tc = TrainConfig(steps=info["config"]["steps"], seed=info["config"]["seed"])
    assert info["config"]["lr"] == tc.lr and info["config"]["batch_size"] == tc.batch_size
    train(tmp_path, tc, stop_after=3)
    for step, folder in checkpoint_steps(tmp_path).items():
        shipped = load_file(SHIPPED / "checkpoints" / folder.name / "model.safetensors")
        again = load_file(folder / "model.safetensors")
        for key, value in shipped.items():
            torch.testing.assert_close(again[key], value, rtol=0, atol=1e-6, msg=f"step {step} {key}")
