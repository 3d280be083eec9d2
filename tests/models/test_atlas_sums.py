"""The atlas's exact sums (models/reads/atlas_sums.py): any split of the values, merged in any order,
gives the same bits; the mean and sd are the exact ones rounded once (checked with fractions), NaN
left out; the JSON round trip is exact."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from models.reads.atlas_sums import ExactStats, HeadSums, decode_int, encode_int

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)  # some near 1e308: a variance beyond float64


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(finite, st.just(math.nan)), min_size=1, max_size=40), st.data())
def test_any_split_merges_to_the_same_bits_and_the_exact_rounding(values, data):
    whole = ExactStats((1,))
    for v in values:
        whole.add(np.array([v]))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(values)), max_size=6)))
    parts = [values[a:b] for a, b in zip([0, *cuts], [*cuts, len(values)])]
    order = data.draw(st.permutations(range(len(parts))))
    merged = ExactStats((1,))
    for i in order:
        part = ExactStats((1,))
        if parts[i]:
            part.add(np.array(parts[i])[:, None])
        merged.merge(ExactStats.from_json(json.loads(json.dumps(part.to_json())), (1,)))
    got, want = merged.result(), whole.result()
    assert [x.tobytes() for x in got] == [x.tobytes() for x in want]
    ok = [Fraction(v) for v in values if math.isfinite(v)]
    mean, sd = got[0][0], got[1][0]
    if not ok:
        assert math.isnan(mean) and math.isnan(sd)
        return
    exact = sum(ok) / len(ok)
    assert mean == float(exact)  # rounded once, correctly
    if len(ok) > 1:
        var = sum((x - exact) ** 2 for x in ok) / (len(ok) - 1)
        assert sd == (math.sqrt(float(var)) if var < Fraction(2**1023) * 2 else math.inf)
    else:
        assert math.isnan(sd)


def test_against_numpy_and_big_ints_round_trip():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, (500, 2, 3))
    x[::7, 0, 1] = np.nan
    s = ExactStats((2, 3))
    s.add(x)
    mean, sd = s.result()
    np.testing.assert_allclose(mean, np.nanmean(x, 0), rtol=1e-13)
    np.testing.assert_allclose(sd, np.nanstd(x, 0, ddof=1), rtol=1e-12)
    for v in (0, 1, -1, 2**2000 + 3, -(5 << 1074), 7 << 40):
        assert decode_int(encode_int(v)) == v


def test_best_lines_merge_as_the_first_line_of_the_largest_value():
    a, b = HeadSums(["m"], (1, 2)), HeadSums(["m"], (1, 2))
    a.add([3, 5], {"m": np.array([[[0.5, 0.2]], [[0.9, 0.2]]])})
    b.add([1, 8], {"m": np.array([[[0.9, np.nan]], [[0.1, 0.2]]])})
    for first, second in ((a, b), (b, a)):
        total = HeadSums(["m"], (1, 2))
        total.merge(first)
        total.merge(second)
        assert total.best_line["m"].tolist() == [[1, 3]] and total.best_value["m"].tolist() == [[0.9, 0.2]]
