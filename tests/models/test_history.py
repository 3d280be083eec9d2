"""The time machine for heads (issue 48): a history's integrity from content hashes, Trainer
checkpoint folders, heads matched back to a permutation, role events, and why at every step."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from models import api
from models.history.events import role_events
from models.history.heads import follow, head_signatures, match_heads
from models.history.integrity import CACHE_ENV, HashCache, check_history
from models.pretrained import load_model
from models.pretrained.steps import model_steps

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "resources" / "models" / "induction"
REPEATED = "k78lt2nxawscgzef4j1qh69ibu305ok78lt2nxawscgzef4j1qh69ibu305o"
STEPS = (0, 583, 1007, 2500)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))


def copy_history(folder: Path, steps=STEPS, layout: str = "run") -> Path:
    """Some of the shipped checkpoints as ``RUN/checkpoints/step-N`` or a Trainer's ``checkpoint-N``."""
    shipped = model_steps(SHIPPED)
    for step in steps:
        target = folder / "checkpoints" / f"step-{step:06d}" if layout == "run" else folder / f"checkpoint-{step}"
        shutil.copytree(shipped[step], target)
    if layout == "run":
        shutil.copy2(SHIPPED / "losses.csv", folder / "losses.csv")
    return folder


def test_a_checkpoint_copied_over_another_is_named(tmp_path):
    run = copy_history(tmp_path / "run")
    steps = model_steps(run)
    sound = check_history(steps)
    assert not sound.broken and sound.message() == "" and len(set(sound.hashes.values())) == len(STEPS)
    shutil.copy2(steps[2500] / "model.safetensors", steps[583] / "model.safetensors")
    broken = check_history(model_steps(run))
    assert broken.broken and broken.groups == [[583, 2500]]
    assert broken.message().startswith("step 583 and step 2500 hold the same weights: this history is broken")
    assert broken.duplicate_of(2500) == 583 and broken.duplicate_of(583) is None and broken.duplicate_of(0) is None


def test_files_that_differ_only_in_metadata_keep_their_hash(tmp_path):
    run = copy_history(tmp_path / "run")
    before = check_history(model_steps(run)).hashes
    for step, folder in model_steps(run).items():  # saved again with other metadata (and key order)
        tensors = load_file(folder / "model.safetensors")
        save_file(dict(reversed(list(tensors.items()))), folder / "model.safetensors",
                  metadata={"format": "pt", "saved_by": f"another tool at step {step}"})  # fmt: skip
    after = check_history(model_steps(run))
    assert after.hashes == before and not after.broken
    folder = model_steps(run)[1007]  # one weight changed by one ulp: another hash
    tensors = load_file(folder / "model.safetensors")
    key = sorted(tensors)[0]
    tensors[key].view(-1)[0] = torch.nextafter(tensors[key].view(-1)[0], torch.tensor(1.0))
    save_file(tensors, folder / "model.safetensors")
    assert check_history(model_steps(run)).hashes[1007] != before[1007]


def test_hashes_are_computed_once_and_remembered(tmp_path):
    run = copy_history(tmp_path / "run", steps=(0, 583))
    first = HashCache()
    hashes = check_history(model_steps(run), cache=first).hashes
    assert first.hashed == 2
    first.save()
    again = HashCache()
    assert check_history(model_steps(run), cache=again).hashes == hashes and again.hashed == 0
    assert not any(p.name.endswith(".json") and "hash" in p.name for p in run.rglob("*"))  # the user's folder untouched


def test_a_trainer_output_dir_is_a_history(tmp_path):
    out = copy_history(tmp_path / "out", steps=(583, 2500), layout="trainer")
    steps = model_steps(out)
    assert list(steps) == [583, 2500] and steps[583].name == "checkpoint-583"
    by_name = api.load(out, step="checkpoint-583").trace(REPEATED, layer=1).stage("weights")
    by_number = api.load(out, step=583).trace(REPEATED, layer=1).stage("weights")
    np.testing.assert_array_equal(by_name, by_number)
    last = api.load(out).trace(REPEATED, layer=1).stage("weights")  # the output_dir alone: its last checkpoint
    expected = api.load("induction").trace(REPEATED, layer=1).stage("weights")
    np.testing.assert_allclose(last, expected, atol=1e-6)


def permuted_copy(src: Path, dst: Path, perms: dict[int, list[int]]) -> None:
    """A LLaMA folder whose layer ``l`` heads are reordered by ``perms[l]``: new head i is old head
    perms[l][i]; q, k, v rows and o columns move together, so the model computes the same function."""
    shutil.copytree(src, dst)
    cfg = json.loads((src / "config.json").read_text())
    dk = cfg["hidden_size"] // cfg["num_attention_heads"]
    assert cfg.get("num_key_value_heads", cfg["num_attention_heads"]) == cfg["num_attention_heads"]
    tensors = load_file(src / "model.safetensors")
    for layer, perm in perms.items():
        rows = torch.cat([torch.arange(p * dk, (p + 1) * dk) for p in perm])
        pre = f"model.layers.{layer}.self_attn."
        for name in ("q_proj", "k_proj", "v_proj"):
            tensors[pre + name + ".weight"] = tensors[pre + name + ".weight"][rows].contiguous()
        tensors[pre + "o_proj.weight"] = tensors[pre + "o_proj.weight"][:, rows].contiguous()
    save_file(tensors, dst / "model.safetensors")


def test_heads_permuted_in_a_copy_are_matched_back(tmp_path):
    """A copy of the trained model with its heads reordered computes the same thing (transformers'
    logits, checked) and each head is matched back to its old number, with similarity 1."""
    transformers = pytest.importorskip("transformers")
    perms = {0: [2, 0, 3, 1], 1: [3, 2, 1, 0]}
    permuted_copy(SHIPPED, tmp_path / "permuted", perms)
    ids = torch.tensor([[0, 5, 9, 12, 5, 9, 12, 7]])
    logits = [transformers.AutoModelForCausalLM.from_pretrained(f).eval()(ids).logits.detach()
              for f in (SHIPPED, tmp_path / "permuted")]  # fmt: skip
    torch.testing.assert_close(logits[0], logits[1], atol=1e-5, rtol=1e-5)
    original = head_signatures(load_model(SHIPPED))
    copy = head_signatures(load_model(tmp_path / "permuted"))
    m = match_heads(copy, original)
    assert m.basis == "maps"
    for layer, perm in perms.items():
        assert m.match[layer].tolist() == perm
    np.testing.assert_allclose(m.score, 1.0, atol=1e-5)
    assert follow([m]).shape == (2, 2, 4)


def test_profiles_match_models_whose_probes_differ():
    sig = head_signatures(load_model(SHIPPED))
    other = type(sig)(sig.maps[:, ::-1].copy(), {k: v[:, ::-1].copy() for k, v in sig.detectors.items()},
                      {k: v[:, ::-1].copy() for k, v in sig.metrics.items()}, ())  # fmt: skip
    m = match_heads(sig, other)
    assert m.basis == "profile"
    # a profile tells heads apart by their scores only: every head whose profile is unlike the others'
    prof = sig.profile()[1]
    distinct = [h for h in range(4) if min(np.linalg.norm(prof[h] - prof[g]) for g in range(4) if g != h) > 1e-3]
    assert len(distinct) >= 2
    assert [m.match[1, h] for h in distinct] == [3 - h for h in distinct]


def test_events_are_the_crossings_of_a_threshold():
    steps = [0, 10, 20, 30]
    induction = np.zeros((4, 2, 2))
    induction[2:, 1, 0] = 0.45  # L1 H0 becomes one between 10 and 20
    induction[1:3, 0, 1] = 0.35  # L0 H1 is one from 10 to 20, then not
    events = role_events(steps, {"induction": induction}, {0: 3.0, 10: 2.5, 20: 1.0, 30: 0.9}, loss_name="loss")
    assert [(e.layer, e.head, e.becomes, e.step_before, e.step_after) for e in events] == [
        (0, 1, True, 0, 10), (1, 0, True, 10, 20), (0, 1, False, 20, 30)]
    assert events[1].text() == "L1 H0 becomes an induction head between steps 10 and 20 (induction score " \
                               "0.00 → 0.45; loss 2.500 → 1.000)"


def test_the_shipped_phase_change_as_events(tmp_path):
    out = tmp_path / "timeline"
    done = subprocess.run([sys.executable, str(ROOT / "main.py"), "timeline", "--model", "induction",
                           "--steps", "583,839,1007,2500", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "L1 H0 becomes an induction head between steps 839 and 1007" in done.stdout
    assert "L0 H0 becomes a previous-token head between steps 839 and 1007" in done.stdout
    with open(out / "steps.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 2 * 4
    final = [r for r in rows if r["step"] == "2500" and r["layer"] == "1" and r["head"] == "0"][0]
    assert float(final["induction"]) > 0.3 and final["follows"] == "0" and float(final["similarity"]) > 0.5
    assert len({r["hash"] for r in rows}) == 4 and all(r["same_weights_as"] == "" for r in rows)
    assert json.loads((out / "manifest.json").read_text())["broken"] is None


def test_timeline_names_a_broken_history_first(tmp_path):
    run = copy_history(tmp_path / "run", steps=(0, 583, 1007))
    steps = model_steps(run)
    shutil.copy2(steps[0] / "model.safetensors", steps[1007] / "model.safetensors")
    command = [sys.executable, str(ROOT / "main.py"), "timeline", "--model", str(run), "--out", str(tmp_path / "t")]
    done = subprocess.run(command + ["--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == ("warning: step 0 and step 1007 hold the same weights: this history is "
                                            "broken (a checkpoint saved twice, or a step that serves another's "
                                            "weights)")  # fmt: skip
    rows = list(csv.DictReader(open(tmp_path / "t" / "steps.csv", encoding="utf-8")))
    assert {r["same_weights_as"] for r in rows if r["step"] == "1007"} == {"0"}
    refused = subprocess.run(command + ["--quiet"], capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and refused.stderr.startswith("error:") and len(refused.stderr.splitlines()) == 1


def test_why_over_steps_adds_up_at_every_step():
    trace = api.load("induction").trace(REPEATED, layer=1)
    series = trace.why(0, 40, 11, steps="first,583,1007,last")
    assert series["steps"] == [0, 583, 1007, 2500]
    for s, step in enumerate(series["steps"]):
        total = sum(t["values"][s] for t in series["terms"])
        size = sum(abs(t["values"][s]) for t in series["terms"])
        assert abs(total - series["score"][s]) <= 1e-5 * max(size, abs(series["score"][s])), step
        one = api.load("induction", step=step).trace(REPEATED, layer=1).why(0, 40, 11)
        assert one["score"] == pytest.approx(series["score"][s], rel=1e-6, abs=1e-6)
    # at the end the key side is written by L0 H0, the previous-token head (K-composition)
    last = {(t["query"], t["key"]): t["values"][-1] for t in series["terms"]}
    assert max(last, key=lambda k: abs(last[k]))[1] == "L0 H0"


def test_why_steps_on_the_command_line(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "main.py"), "why", "--model", "induction", "--layer", "1",
                           "--sentence", REPEATED, "--cell", "0,40,11", "--steps", "first,last", "--json"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    series = json.loads(done.stdout)
    assert series["steps"] == [0, 2500] and len(series["score"]) == 2
    bad = subprocess.run([sys.executable, str(ROOT / "main.py"), "why", "--model", "induction", "--layer", "1",
                          "--sentence", REPEATED, "--cell", "0,40,11", "--steps", "12345"],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "no step 12345" in bad.stderr


def test_a_hub_cache_whose_step_branches_serve_one_blob_is_named(tmp_path):
    """Pythia's case (EleutherAI/pythia #205): step revisions whose snapshots link to the same weights blob."""
    repo = tmp_path / "models--org--pythia-tiny"
    shipped = model_steps(SHIPPED)
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    for i, (step, source) in enumerate(((0, 0), (1000, 583), (143000, 0))):
        snapshot = repo / "snapshots" / f"rev{i}"
        shutil.copytree(shipped[source], snapshot)
        blob = repo / "blobs" / f"weights-of-{source}"
        if not blob.exists():
            shutil.move(snapshot / "model.safetensors", blob)
        else:
            (snapshot / "model.safetensors").unlink()
        (snapshot / "model.safetensors").symlink_to(blob)
        (repo / "refs" / f"step{step}").write_text(f"rev{i}")
    steps = model_steps(repo / "snapshots" / "rev2")
    assert list(steps) == [0, 1000, 143000]
    found = check_history(steps)
    assert found.groups == [[0, 143000]]
    assert found.message().startswith("step 0 and step 143000 hold the same weights: this history is broken")
