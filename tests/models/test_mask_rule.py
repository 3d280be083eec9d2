"""The one mask rule (models/engine/mask_rule.py) hides what transformers' own mask functions hide, and every
place that builds a mask (the engine's description, a variant, the reads' parameters, the window's painter
and Alt+click) builds it through it: the same cells for the same facts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.engine.attend import Variant
from models.engine.mask_rule import hidden_array
from models.engine.masks import MaskSpec

masking = pytest.importorskip("transformers.masking_utils")


def theirs(fn, n_q: int, n_k: int, q0: int = 0, k0: int = 0) -> np.ndarray:
    """transformers' mask function evaluated cell by cell: True where it lets the key be seen."""
    zero = torch.tensor(0)
    return np.array([[bool(fn(zero, zero, torch.tensor(q0 + a), torch.tensor(k0 + b))) for b in range(n_k)]
                     for a in range(n_q)])  # fmt: skip


CASES = [  # (our facts, transformers' mask function)
    (dict(causal=True), lambda: masking.causal_mask_function),
    (dict(causal=True, window=3), lambda: masking.sliding_window_causal_mask_function(3)),
    (dict(band=2), lambda: masking.sliding_window_bidirectional_mask_function(2)),
]


@pytest.mark.parametrize(("facts", "fn"), CASES)
@pytest.mark.parametrize(("n_q", "n_k", "q0", "k0"), [(7, 7, 0, 0), (3, 9, 5, 0), (4, 5, 6, 3), (1, 12, 11, 0)])
def test_the_rule_is_transformers_mask(facts, fn, n_q, n_k, q0, k0):
    expected = ~theirs(fn(), n_q, n_k, q0, k0)
    np.testing.assert_array_equal(hidden_array(n_q, n_k, q0=q0, k0=k0, **facts), expected)
    rows = MaskSpec(**facts).rows(q0, q0 + n_q, k0 + n_k, torch.device("cpu"), k0)
    np.testing.assert_array_equal(rows.numpy(), expected)
    own = Variant(**facts).hidden(q0, n_q, k0, n_k, torch.device("cpu"))
    np.testing.assert_array_equal(np.zeros_like(expected) if own is None else own.numpy(), expected)


def test_pads_and_a_custom_mask_join_the_rule():
    pad = torch.ones(1, 6, dtype=torch.bool)
    pad[0, [1, 4]] = False
    fn = masking.and_masks(masking.causal_mask_function, masking.padding_mask_function(pad))
    custom = np.zeros((6, 6), bool)
    custom[5, 0] = True
    expected = ~theirs(fn, 6, 6) | custom
    np.testing.assert_array_equal(hidden_array(6, 6, causal=True, pads=(1, 4), custom=custom), expected)
    rows = MaskSpec(causal=True, pads=(1, 4), custom=custom).rows(0, 6, 6, torch.device("cpu"))
    np.testing.assert_array_equal(rows.numpy(), expected)


def test_a_pad_beyond_the_keys_hides_nothing():
    assert not hidden_array(2, 3, pads=(7,)).any()
