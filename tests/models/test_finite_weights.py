"""A checkpoint tensor is refused, naming the first bad element, exactly when it holds a NaN or an
infinity, whatever its dtype; a finite tensor whose sum overflows is kept (the check's fast path is
a sum, its fallback the element-wise test)."""

from __future__ import annotations

import pytest
import torch

from models.config import InputError
from models.pretrained.checkpoint import finite_tensor


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("bad", [{(2, 3): "nan"}, {(0, 1): "inf"}, {(4, 0): "-inf"},
                                 {(1, 1): "inf", (3, 2): "-inf"}])  # fmt: skip
def test_a_nan_or_infinity_is_refused_by_its_first_index(dtype, bad):
    t = torch.randn(5, 4).to(dtype)
    for index, value in bad.items():
        t[index] = float(value)
    first = min(bad)
    with pytest.raises(InputError, match=rf"'w' .* at \[{first[0]}, {first[1]}\].*corrupt"):
        finite_tensor(t, "w")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_finite_values_whose_sum_overflows_are_kept(dtype):
    big = torch.finfo(dtype).max / 2
    t = torch.full((64,), big, dtype=dtype)
    assert not torch.isfinite(t.sum())  # the fast path cannot clear it
    assert finite_tensor(t, "w") is t


def test_an_empty_tensor_and_an_ordinary_one_are_kept():
    for t in (torch.empty(0, 3), torch.randn(30, 7)):
        assert finite_tensor(t, "w") is t
