"""The training code (models/training): its model is transformers' LlamaForCausalLM, its tokenizer
reads in both tokenizers, its checkpoints are deterministic, its command line is safe."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from main import main
from models.pretrained import load_model
from models.training.checkpoints import checkpoint_steps, parse_step, read_losses, save_model, schedule
from models.training.data import VOCAB, DataConfig, batch, skip_table, training_stream
from models.training.tiny_llama import TinyConfig, TinyLlama
from models.training.train import TrainConfig, train

transformers = pytest.importorskip("transformers")
SMALL = TrainConfig(steps=6, checkpoints=4, batch_size=4, data=DataConfig(seq_len=32, max_block=12))


def test_tiny_llama_gives_transformers_logits(tmp_path):
    torch.manual_seed(1)
    model = TinyLlama(TinyConfig(vocab_size=len(VOCAB), initializer_range=0.3))
    save_model(tmp_path, model)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids = torch.from_numpy(batch(training_stream(3), 2, DataConfig(seq_len=50), skip_table(3)).ids)
    with torch.no_grad():
        ours, weights = model(ids)
        theirs = hf(ids, output_attentions=True)
    assert torch.allclose(ours, theirs.logits, atol=1e-5)
    for a, b in zip(weights, theirs.attentions, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_tokenizer_reads_in_transformers_and_the_explorer(tmp_path):
    save_model(tmp_path, TinyLlama(TinyConfig(vocab_size=len(VOCAB))))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ours = load_model(tmp_path).encode("The cat, 42!")
    assert ours.tokens == ("<s>", "t", "h", "e", " ", "c", "a", "t", ",", " ", "4", "2", "!")
    assert list(ours.ids) == fast("The cat, 42!")["input_ids"] == auto("The cat, 42!")["input_ids"]
    assert set("abcdefghijklmnopqrstuvwxyz0123456789 ") <= set(fast.get_vocab())


def test_schedule_is_log_spaced_with_both_ends():
    steps = schedule(1500, 40)
    assert steps[0] == 0 and steps[-1] == 1500 and len(steps) == 40
    assert steps[:4] == [0, 1, 2, 3] and steps == sorted(set(steps))


def test_training_is_deterministic_and_writes_model_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    rows = train(a, SMALL)
    train(b, SMALL, stop_after=3)  # the first steps again, stopped early
    steps = list(checkpoint_steps(a))
    assert steps == schedule(6, 4) and [r["step"] for r in read_losses(a / "losses.csv")] == steps
    for step in checkpoint_steps(b):
        x = load_file(a / "checkpoints" / f"step-{step:06d}" / "model.safetensors")
        y = load_file(b / "checkpoints" / f"step-{step:06d}" / "model.safetensors")
        assert all(torch.equal(x[k], y[k]) for k in x)
    assert rows[0]["train_loss"] == pytest.approx(np.log(len(VOCAB)), abs=0.1)  # untrained: uniform
    first = load_file(a / "checkpoints" / "step-000000" / "model.safetensors")
    final = load_file(a / "model.safetensors")
    assert not torch.equal(first["lm_head.weight"], final["lm_head.weight"])
    assert load_model(a / "checkpoints" / "step-000003").num_layers == 2


def test_another_seed_gives_other_weights(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    train(a, SMALL, stop_after=0)
    train(b, replace(SMALL, seed=1), stop_after=0)
    x, y = (load_file(p / "checkpoints" / "step-000000" / "model.safetensors") for p in (a, b))
    assert not torch.equal(x["lm_head.weight"], y["lm_head.weight"])


def test_parse_step():
    assert parse_step("first", [0, 5, 9], "m") == 0
    assert parse_step(None, [0, 5, 9], "m") == 9
    assert parse_step("step-5", [0, 5, 9], "m") == 5
    with pytest.raises(Exception, match="no step 6 \\(nearest: 5"):
        parse_step("6", [0, 5, 9], "m")
    with pytest.raises(Exception, match="step number"):
        parse_step("late", [0, 5, 9], "m")


def test_train_command_refuses_bad_input_and_writes_atomically(tmp_path, capsys):
    assert main(["train", "--steps", "0", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.startswith("error: --steps")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep")
    assert main(["train", "--out", str(tmp_path / "full")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "full" / "mine.txt").read_text() == "keep"
    assert not (tmp_path / "x").exists()
