"""Explain one number: where a traced cell comes from, with its real inputs.

``explain(trace, params, stage, cell)`` returns a :class:`Derivation`: the cell's formula with the
numbers filled in, its value (exactly ``trace[stage].array[cell]``) and, for every cell that is a
sum, every summand in order (bias included) so that they add up to the value. The summands are
computed in float64 from the trace's own float32 arrays and the layer's parameters
(:class:`models.reads.params.LayerParams`). Notation follows the study notes: ``s_ij = q_i · k_j``,
``a_ij = softmax`` weights, ``W_C`` (= ``W_O``) the output matrix, ``P[i, 2j] = sin(i/10000^(2j/d))``.

The data type and its renderings are in models/reads/derivation.py, the per-stage derivations in
models/reads/explain_stages.py; this module checks the requested cell and dispatches.
"""

from __future__ import annotations

from collections.abc import Callable

from models.config import InputError
from models.engine.trace import STAGE_ORDER, AttentionTrace
from models.reads import explain_families as fam
from models.reads import explain_norms
from models.reads import explain_stages as st
from models.reads.derivation import Derivation, Term, num
from models.reads.explain_context import Context, cell_value
from models.reads.explain_encdec import biased
from models.reads.params import LayerParams

__all__ = ["Derivation", "Term", "check_cell", "explain", "num", "stage_axes"]


def _or_sink(derive: Callable[[Context], Derivation]) -> Callable[[Context], Derivation]:
    """A pair stage's derivation, or the learned sink's for the extra ``sink`` key column (gpt-oss)."""
    return lambda ctx: fam.sink(ctx) if ctx.is_sink(ctx.cell[-1]) else derive(ctx)


# One derivation per stage: the toy's stages in explain_stages, the families' own steps in explain_families.
DERIVATIONS: dict[str, Callable[[Context], Derivation]] = {
    "embeddings": st.embeddings,
    "positional_encoding": st.positional_encoding,
    "input": st.input_,
    "query_input": st.query_input,
    "q": lambda ctx: st.projection(ctx, "q"),
    "k": lambda ctx: st.projection(ctx, "k"),
    "v": lambda ctx: st.projection(ctx, "v"),
    "q_normed": lambda ctx: fam.normed(ctx, "q"),
    "k_normed": lambda ctx: fam.normed(ctx, "k"),
    "q_rotated": lambda ctx: fam.rotated(ctx, "q"),
    "k_rotated": lambda ctx: fam.rotated(ctx, "k"),
    "scores": _or_sink(st.scores),
    "scaled": _or_sink(st.scaled),
    "biased": biased,
    "softcapped": lambda ctx: fam.softcapped(ctx),
    "masked": _or_sink(st.masked),
    "weights": st.weights,
    "weighted_norms": explain_norms.weighted_norms,
    "value_norms": explain_norms.value_norms,
    "head_output": st.head_output,
    "concat": st.concat,
    "output": st.output,
}


# --- the entry point ------------------------------------------------------------------------------


def stage_axes(trace: AttentionTrace, stage: str) -> list[str]:
    s = trace[stage]
    return (["head"] if s.per_head else []) + [s.row_axis, s.col_axis]


def check_cell(trace: AttentionTrace, stage: str, cell) -> tuple[int, ...]:
    """Validate ``stage`` and ``cell`` against the trace; a one-line :class:`InputError` if wrong."""
    if stage not in STAGE_ORDER:
        raise InputError(f"unknown stage {stage!r}; choose one of {', '.join(STAGE_ORDER)}")
    if stage not in trace:
        raise InputError(f"this input has no stage {stage!r}; its stages are {', '.join(trace.names)}")
    shape = trace[stage].shape
    axes = stage_axes(trace, stage)
    try:
        index = tuple(int(c) for c in cell)
        if any(isinstance(c, bool) or int(c) != c for c in cell):
            raise ValueError
    except (TypeError, ValueError):
        raise InputError(f"a cell is {len(axes)} integers ({','.join(axes)}), got {cell!r}") from None
    if len(index) != len(shape):
        raise InputError(
            f"stage {stage!r} is indexed by {len(shape)} numbers ({','.join(axes)}), got {len(index)}"
        )
    if any(not 0 <= i < n for i, n in zip(index, shape)):
        raise InputError(
            f"cell {','.join(map(str, index))} is outside stage {stage!r} of shape "
            f"{'×'.join(map(str, shape))} ({','.join(axes)}, counted from 0)"
        )
    return index


def explain(trace: AttentionTrace, params: LayerParams, stage: str, cell) -> Derivation:
    """Derive cell ``cell`` of stage ``stage`` of ``trace`` from its inputs."""
    index = check_cell(trace, stage, cell)
    d = DERIVATIONS[stage](Context(trace, params, stage, index))
    d.value = cell_value(trace, stage, index)
    return d
