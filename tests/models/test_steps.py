"""--step and --all-steps: a model's training steps from checkpoints/step-N folders or hub-cache
revisions, and steps.csv / losses.csv."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest

from main import main
from models.config import InputError
from models.pretrained import load_model
from models.pretrained.steps import cache_revisions, checkpoint_steps, model_steps, step_folder
from models.training.data import DataConfig
from models.training.scores import induction_scores
from models.training.train import TrainConfig, train

SMALL = TrainConfig(steps=4, checkpoints=3, batch_size=2, data=DataConfig(seq_len=24, max_block=8))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    train(out, SMALL)
    return out


def test_step_folders_and_names(run):
    steps = checkpoint_steps(run)
    assert list(steps) == [0, 2, 4] or list(steps)[0] == 0 and list(steps)[-1] == 4
    assert step_folder(run, "first") == steps[0] and step_folder(run, None) == run
    assert load_model(run, step="first").name.endswith("@ step-000000")
    with pytest.raises(InputError, match="no step 3"):
        load_model(run, step=3)


def test_hub_cache_revisions(tmp_path, run):
    repo = tmp_path / "models--org--tiny"
    for i, step in enumerate((0, 4)):
        shutil.copytree(run / "checkpoints" / f"step-{step:06d}", repo / "snapshots" / f"hash{i}")
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / f"step{step}").write_text(f"hash{i}")
    (repo / "refs" / "main").write_text("hash1")
    revs = cache_revisions(repo / "snapshots" / "hash1")
    assert revs == {0: repo / "snapshots" / "hash0", 4: repo / "snapshots" / "hash1"}
    assert model_steps(repo / "snapshots" / "hash1") == revs
    first = load_model(repo / "snapshots" / "hash1", step="first")
    direct = load_model(run / "checkpoints" / "step-000000")
    a = first.layer_weights("abcabc")[1]
    assert np.array_equal(a, direct.layer_weights("abcabc")[1])


def test_induction_score_on_a_made_up_pattern():
    tokens = ["<s>", "a", "b", "c", "a", "b", "c"]
    A = np.zeros((1, 7, 7))
    for i in range(7):
        A[0, i, max(i - 2, 0)] = 1.0  # queries 4, 5, 6 look at 2, 3, 4: the token after the copy
    assert induction_scores(A, tokens)[0] == pytest.approx(1.0)
    A2 = np.zeros((1, 7, 7))
    A2[0, np.arange(7), np.maximum(np.arange(7) - 1, 0)] = 1.0  # one back: never the right token
    assert induction_scores(A2, tokens)[0] == 0.0


def test_export_all_steps(tmp_path, run, capsys):
    out = tmp_path / "steps"
    assert main(["export", "--model", str(run), "--all-steps", "--sentence", "abcdabcd", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "steps.csv")))
    steps = list(checkpoint_steps(run))
    assert len(rows) == len(steps) * 2 * 4
    assert list(rows[0])[:5] == ["step", "layer", "head", "previous", "induction"] and len(rows[0]) == 12  # + 7 metrics
    assert [int(r["step"]) for r in csv.DictReader(open(out / "losses.csv"))] == steps
    assert "steps [" in capsys.readouterr().err
    assert main(["export", "--model", str(run), "--all-steps", "--sentence", "ab", "--out", str(out)]) == 2
    assert main(["export", "--model", str(run), "--all-steps", "--sentence", "ab", "--out", str(out),
                 "--force"]) == 0  # fmt: skip


def test_step_errors(tmp_path, run, capsys):
    out = tmp_path / "x"
    code = main(["export", "--model", str(run / "checkpoints" / "step-000000"), "--all-steps", "--sentence", "ab",
                 "--out", str(out)])  # fmt: skip
    assert code == 2 and "no training steps" in capsys.readouterr().err
    assert main(["export", "--model", str(run), "--step", "late", "--sentence", "ab", "--out", str(out)]) == 2
    assert "error: --step must be" in capsys.readouterr().err
    assert main(["export", "--step", "1", "--sentence", "ab", "--out", str(out)]) == 2
    assert not out.exists()
