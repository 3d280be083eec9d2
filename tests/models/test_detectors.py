"""Head detectors against TransformerLens's formulas, recomputed here on the very probes the app
generates, from transformers' own attentions (MiniLM, a random GPT-2 for the decoder-only
retrieval detector); and the detectors on matrices whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.pretrained import load_model, resolve_model
from models.reads import detectors
from models.reads.detectors import DETECTORS, detect, make_probes, model_probes

transformers = pytest.importorskip("transformers")


# --- TransformerLens head_detector.py, written out in torch as it is there -------------------------
def tl_duplicate(tokens: torch.Tensor) -> torch.Tensor:
    token_pattern = tokens.repeat(tokens.shape[-1], 1).numpy()
    eq_mask = np.equal(token_pattern, token_pattern.T).astype(int)
    np.fill_diagonal(eq_mask, 0)
    return torch.tril(torch.as_tensor(eq_mask).float())


def tl_induction(tokens: torch.Tensor) -> torch.Tensor:
    duplicate_pattern = tl_duplicate(tokens)
    shifted_tensor = torch.roll(duplicate_pattern, shifts=1, dims=1)
    zeros_column = torch.zeros(duplicate_pattern.shape[0], 1)
    result_tensor = torch.cat((zeros_column, shifted_tensor[:, 1:]), dim=1)
    return torch.tril(result_tensor)


def tl_previous(tokens: torch.Tensor) -> torch.Tensor:
    detection_pattern = torch.zeros(tokens.shape[-1], tokens.shape[-1])
    detection_pattern[1:, :-1] = torch.eye(tokens.shape[-1] - 1)
    return torch.tril(detection_pattern)


def tl_score(attention_pattern: torch.Tensor, detection_pattern: torch.Tensor) -> float:
    score = attention_pattern * detection_pattern  # error_measure="mul", nothing excluded
    return (score.sum() / attention_pattern.sum()).item()


def expected_scores(attentions_of, probes, layers: int, heads: int, decoder: bool) -> dict[str, np.ndarray]:
    acc = {name: [] for name in DETECTORS}
    for probe in probes:
        tokens = torch.tensor(probe.ids)
        att = attentions_of(probe.ids)  # (L, h, n, n) float64 torch

        def per(f, att=att) -> np.ndarray:  # f called at once, on this probe's attentions
            return np.array([[f(att[layer, h]) for h in range(heads)] for layer in range(layers)])

        if probe.kind == "repeats":
            acc["previous"].append(per(lambda a: tl_score(a, tl_previous(tokens))))  # noqa: B023
            acc["duplicate"].append(per(lambda a: tl_score(a, tl_duplicate(tokens))))  # noqa: B023
        if probe.kind == "induction":
            acc["induction"].append(per(lambda a: tl_score(a, tl_induction(tokens))))  # noqa: B023
        if probe.kind in ("repeats", "induction"):
            acc["sink"].append(per(lambda a: a[:, 0].mean().item()))
        if probe.kind == "retrieval":
            ids = list(probe.ids)
            twice = [t for t in set(ids) if ids.count(t) == 2]
            k = len(twice)
            copy = len(ids) - k  # the needle's copy closes the probe (no special token after it here)
            needle = [ids.index(t) for t in ids[copy:]]  # where each copied token first appeared
            acc["retrieval"].append(per(lambda a: np.mean(
                [int(a[copy + t - 1].argmax()) == needle[t] for t in range(1, k)])))  # fmt: skip  # noqa: B023
    out = {name: np.mean(v, axis=0) for name, v in acc.items() if v}
    if not decoder:
        out["retrieval"] = np.full((layers, heads), np.nan)
    return out


def transformers_attentions(ref):
    def attentions_of(ids) -> torch.Tensor:
        with torch.no_grad():
            got = ref(torch.tensor([list(ids)]), output_attentions=True)
        return torch.stack([a[0] for a in got.attentions]).double()

    return attentions_of


def test_minilm_detectors_equal_transformer_lens_formulas():
    model = load_model("minilm", device="cpu")
    ref = transformers.AutoModel.from_pretrained(resolve_model("minilm"), attn_implementation="eager").eval()
    probes = model_probes(model)
    assert probes[0].ids[0] == model.tokenizer.tokenizer.token_to_id("[CLS]")
    assert probes[0].ids[-1] == model.tokenizer.tokenizer.token_to_id("[SEP]")
    assert {p.kind for p in probes} == {"repeats", "induction"}  # no retrieval for an encoder
    got = detect(model)
    want = expected_scores(transformers_attentions(ref), probes, 6, 12, decoder=False)
    for name in DETECTORS:
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, err_msg=name)
    assert got["previous"].max() > 0.5  # MiniLM has previous-token heads


def test_gpt2_detectors_with_retrieval(tmp_path):
    from test_survey import build

    folder, ref = build(tmp_path, "gpt2")
    model = load_model(folder, device="cpu")
    probes = model_probes(model, seed=5)
    assert all(len(p.ids) <= model.max_positions for p in probes)
    assert sum(p.kind == "retrieval" for p in probes) == 4
    got = detect(model, seed=5)
    want = expected_scores(transformers_attentions(ref), probes, model.num_layers, model.num_heads, decoder=True)
    for name in DETECTORS:
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, err_msg=name)


def test_probes_are_seeded_and_shaped_as_documented():
    pool = range(100, 400)
    a, b = make_probes(pool, (1,), (2,), body=32, seed=3), make_probes(pool, (1,), (2,), body=32, seed=3)
    assert a == b and a != make_probes(pool, (1,), (2,), body=32, seed=4)
    rep, ind, ret = a[0], a[4], a[8]
    assert len(rep.ids) == 34 and len(set(rep.ids[1:-1])) <= 8
    block = ind.ids[1:-1]
    assert block[:16] == block[16:] and len(set(block[:16])) == 16
    body = ret.ids[1:-1]
    needle = body[-4:]
    assert body[2:6] == needle and len(set(body[:-4])) == 28
    assert ret.copies == tuple((1 + 28 + t - 1, 1 + 2 + t) for t in range(1, 4))


def test_known_matrices_score_one():
    from models.reads.detectors import Probe, scores_on

    n = 12
    previous = np.eye(n, k=-1)
    previous[0, 0] = 1.0
    probe = Probe("repeats", tuple([5, 6, 7] * 4))
    s = scores_on("repeats", previous, probe)
    assert s["previous"] == pytest.approx((n - 1) / n) and s["sink"] == pytest.approx(2 / n)  # rows 0 and 1
    block = list(range(10, 16))
    ids = tuple(block + block)
    induction = np.zeros((n, n))
    induction[:6, 0] = 1.0
    for i in range(6, n):
        induction[i, i - 5] = 1.0  # attend to the token after the previous occurrence
    assert scores_on("induction", induction, Probe("induction", ids))["induction"] == pytest.approx(0.5)


def test_a_small_vocabulary_gets_shorter_probes_not_a_traceback(tmp_path, monkeypatch):
    """The shipped induction model knows 43 ordinary tokens: ``main.py atlas --model induction`` with no
    corpus stopped on a ValueError (probes wanted 48). Its probes now use what there is; a vocabulary
    of fewer than 6 tokens is one clear message."""
    from test_pretrained_loader import write_tiny_gpt2

    from models.errors import InputError

    model = load_model("induction", device="cpu")
    probes = model_probes(model)
    ind = [p.ids[1:] for p in probes if p.kind == "induction"]  # after its <bos>
    assert ind and all(len(b) >= 40 and b[: len(b) // 2] == b[len(b) // 2 :] for b in ind)
    got = detect(model)
    assert got["induction"].max() > 0.4  # its second layer has induction heads
    tiny = load_model(write_tiny_gpt2(tmp_path / "tiny"), device="cpu")  # 9 words, 12 positions
    assert {len(p.ids) for p in model_probes(tiny)} == {10}  # its 10 tokens (with [UNK]), 12 positions
    monkeypatch.setattr(detectors, "word_pool", lambda *a: [1, 2, 3, 4, 5])
    with pytest.raises(InputError, match="at least 6 distinct ordinary tokens"):
        model_probes(tiny)
