"""The sampling filters on a hand-made distribution (no model)."""

from __future__ import annotations

import pytest
import torch

from models.config import InputError
from models.generate import GenerateSettings, sampling_distribution
from models.generate.sampling import Chooser

PROBS = torch.tensor([0.5, 0.25, 0.15, 0.1], dtype=torch.float64)
LOGITS = PROBS.log()


def test_temperature_one_keeps_the_distribution():
    got = sampling_distribution(LOGITS, GenerateSettings(temperature=1.0))
    torch.testing.assert_close(got, PROBS)


def test_top_k_keeps_the_k_most_likely():
    got = sampling_distribution(LOGITS, GenerateSettings(temperature=1.0, top_k=2))
    torch.testing.assert_close(got, torch.tensor([2 / 3, 1 / 3, 0, 0], dtype=torch.float64))


@pytest.mark.parametrize("p, kept", [(0.5, 1), (0.6, 2), (0.75, 2), (0.8, 3), (1.0, 4)])
def test_top_p_keeps_the_smallest_set_reaching_p(p, kept):
    got = sampling_distribution(LOGITS, GenerateSettings(temperature=1.0, top_p=p))
    want = torch.cat((PROBS[:kept] / PROBS[:kept].sum(), torch.zeros(4 - kept, dtype=torch.float64)))
    torch.testing.assert_close(got, want)


def test_low_temperature_sharpens():
    got = sampling_distribution(LOGITS, GenerateSettings(temperature=0.5))
    want = PROBS**2 / (PROBS**2).sum()
    torch.testing.assert_close(got, want)


def test_chooser_greedy_and_seeded():
    assert Chooser(GenerateSettings())(LOGITS.float()) == 0
    s = GenerateSettings(temperature=1.0, seed=11)
    a, b = Chooser(s), Chooser(s)
    draws = [a(LOGITS) for _ in range(50)]
    assert draws == [b(LOGITS) for _ in range(50)] and len(set(draws)) > 1


def test_top_filters_need_sampling():
    with pytest.raises(InputError, match="only when sampling"):
        GenerateSettings(top_p=0.5).validate()
