"""What a long input's weights show beyond the map (issue 34): the structure a long-context model
declares, drawn over the real weights, and where each row's attention goes that the map cannot show.

- the sliding window's band (Mistral, Gemma 2, gpt-oss, … :class:`~models.engine.masks.MaskSpec` ``window``):
  query i sees keys ``i − window < j ≤ i``, so its left edge is the line ``j = i − window + 1``;
  a two-sided local band ``|i − j| ≤ band`` has two edges;
- learned sinks (gpt-oss): each head's logit ``s_h``, one more softmax column with no value;
- the **sink share**: each row's weight on the first key, ``a_i0 = exp((masked_i0 − m_i) / T − l_i)``,
  exact from the row's statistics (:meth:`models.engine.long_rows.LongRows.column`), and with learned
  sinks the sink's share of the row. Rows the overview has not reached yet are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.engine.host import to_numpy
from models.engine.trace import Stage


@dataclass(frozen=True, eq=False)
class LongStructure:
    n_rows: int
    n_keys: int  # the real keys (a learned sink's column is the next one, ``n_keys``)
    window: int | None  # a sliding window that hides something: keys i − window < j ≤ i seen
    band: int | None  # a two-sided band that hides something: keys |i − j| ≤ band seen
    sinks: np.ndarray | None  # (h,) learned sink logits
    first_key: np.ndarray  # (h, n_rows) float32: each row's weight on key 0 (NaN: not known yet)
    sink_share: np.ndarray | None  # (h, n_rows) float32: the learned sink's share of each row

    def edges(self) -> list[tuple[tuple[float, float], tuple[float, float]]]:
        """The band's edges as segments ``((x0, y0), (x1, y1))`` in cell units (x a key, y a query; cell
        (i, j) spans ``[j, j + 1] × [i, i + 1]``): the left edge of the first key each row sees, and
        with a two-sided band the right edge of the last."""
        n, out = self.n_rows, []
        if self.window is not None and self.window < n:  # first key seen by row i: i − window + 1
            w = self.window
            out.append(((0.0, float(w - 1)), (float(min(self.n_keys, n - w + 1)), float(n))))
        if self.band is not None and self.band < n:
            b = self.band  # keys i − b .. i + b
            out.append(((0.0, float(b)), (float(n - b), float(n))))
            out.append(((float(b + 1), 0.0), (float(self.n_keys), float(self.n_keys - b - 1))))
        return out


def long_structure(stage: Stage) -> LongStructure | None:
    """The structure of a long store's weights (None for another stage, or an input that is not long)."""
    store = stage.store
    rows = getattr(store, "long", None)
    if stage.name != "weights" or rows is None:
        return None
    spec = store.spec
    sinks = None if spec.sinks is None else to_numpy(spec.sinks.float()).copy()
    first = np.stack([rows.column(h, 0) for h in range(store.heads)])
    share = None if sinks is None else np.stack([rows.column(h, store.n_keys) for h in range(store.heads)])
    return LongStructure(store.n_q, store.n_keys, spec.mask.window, spec.mask.band, sinks, first, share)
