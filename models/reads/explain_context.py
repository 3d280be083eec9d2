"""What every stage's derivation reads (models/reads/explain_stages.py, explain_families, explain_norms,
explain_encdec): the cell and its trace as float64 (:class:`Context`), and the sums written out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.engine.trace import AttentionTrace
from models.reads.derivation import Term, num
from models.reads.params import LayerParams

F64 = np.float64


@dataclass
class Context:
    trace: AttentionTrace
    params: LayerParams
    stage: str
    cell: tuple[int, ...]

    def a(self, stage: str) -> np.ndarray:
        s = self.trace[stage]
        return _Rows(s) if s.store is not None else s.array.astype(F64)

    def row(self, stage: str, i: int) -> np.ndarray:
        """Row ``i`` of a 2-D stage (``concat``, ``output``) as float64, without computing the others."""
        return self.trace[stage].rows(0, i, i + 1)[0].astype(F64)

    @property
    def value(self) -> float:
        return cell_value(self.trace, self.stage, self.cell)

    @property
    def cross(self) -> bool:
        return "query_input" in self.trace

    def qtok(self, i: int) -> str:
        return f"'{self.trace.query_tokens[i]}' ({i})"

    def ktok(self, j: int) -> str:
        if j == len(self.trace.key_tokens) and self.params.sinks is not None:
            return f"'sink' ({j})"  # the learned sink's column, after the keys
        return f"'{self.trace.key_tokens[j]}' ({j})"

    def is_sink(self, j: int) -> bool:
        """True for the learned attention sink's column (gpt-oss), the last of the n×n stages."""
        return self.params.sinks is not None and j == len(self.trace.key_tokens)

    def group(self, h: int) -> int:
        groups = self.params.head_groups
        return groups[h] if h < len(groups) else h

    def head_note(self, h: int) -> list[str]:
        g = self.group(h)
        if self.params.kv_heads < self.params.heads:
            return [f"Grouped-query attention: query head {h} reads key/value head g({h}) = {g}."]
        return []

    def pair_title(self, what: str) -> str:
        """``what · head h · query 'tok' (i) → key 'tok' (j)``: the title of a per-pair derivation."""
        h, i, j = self.cell
        return f"{what} · head {h} · query {self.qtok(i)} → key {self.ktok(j)}"

    def ids(self, query: bool) -> tuple[int, ...] | None:
        ids = self.params.query_ids if query else self.params.key_ids
        if ids is None and self.params.source == "model":
            ids = tuple(self.trace.meta.get("token_ids", ())) or None
        return ids


class _Rows:
    """An n×n stage read one query row at a time, as float64: ``[h, i]``, ``[h, i, cols]`` (a long
    input's map is never read whole: 131,072² cells a head)."""

    def __init__(self, stage) -> None:
        self.stage = stage

    def __getitem__(self, key):
        h, i, *rest = key if isinstance(key, tuple) else (key,)
        row = query_row(self.stage, int(h), int(i)).astype(F64)  # (n_k,)
        return row[tuple(rest)] if rest else row


def query_row(stage, head: int, i: int) -> np.ndarray:
    """Row ``i`` of head ``head``'s matrix: a long store's computed for that row alone (its block of
    rows, a few hundred at 20,000 tokens, is not needed for one query)."""
    store = stage.store
    if store is not None and store.long is not None:
        return store.region(stage.name, head, i, i + 1, 0, store.n_k)[0]
    return stage.rows(head, i, i + 1)[0]


def cell_value(trace: AttentionTrace, stage: str, cell: tuple[int, ...]) -> float:
    """``trace[stage].array[cell]``, reading only the cell's row of an n×n stage."""
    s = trace[stage]
    if s.store is not None or s.per_head and len(cell) == 3:
        h, i, j = cell
        return float(query_row(s, h, i)[j])
    if len(cell) == 2 and not s.per_head:  # one row (a long input's outputs: from its own weights)
        i, j = cell
        return float(s.rows(0, i, i + 1)[0, j])
    return float(s.array[cell])


def sum_terms(terms: list[Term]) -> float:
    """The terms added in float64 (the derivation's total)."""
    return float(np.sum([t.value for t in terms], dtype=F64))


def products(labels, xs: np.ndarray, ws: np.ndarray) -> list[Term]:
    """One term ``x · w`` per label."""
    return [Term(lab, float(x * w), (float(x), float(w))) for lab, x, w in zip(labels, xs, ws)]


def sum_formula(lhs: str, symbolic: str, terms: list[Term], bias: Term | None) -> str:
    """``lhs = symbolic = t1 + t2 + … (+ b) = total``, written out when short."""
    products = terms if bias is None else terms[:-1]
    if len(products) <= 4:
        body = " + ".join(num(t.value) for t in products)
    else:
        body = f"({len(products)} products, together {num(sum_terms(products))})"
    if bias is not None:
        body += f" {'−' if bias.value < 0 else '+'} {num(abs(bias.value))}"
    return f"{lhs} = {symbolic} = {body} = {num(sum_terms(terms), 6)}"
