"""Query heads and key/value heads: naming and mapping for grouped-query attention (GQA).

In a GQA model (LLaMA-style) ``h`` query heads share ``kv < h`` key/value heads; the trace says
which one each query head reads in ``Stage.head_groups`` (length ``h``). The stages k, v and
k_rotated then hold ``kv`` heads while every other per-head stage holds ``h``. The GUI always
speaks of *query* heads (the head selector, the focused head); these helpers find the array
index a stage needs and the title a plot shows. Plain Python: widgets may import it.
"""

from __future__ import annotations

from models.engine.trace import Stage

ALL_HEADS = -1  # the head choice that shows every head


def heads_shown(stage: Stage, head: int) -> list[int]:
    """The array indices of ``stage`` a view shows for the head choice ``head`` (a query head, or
    ALL_HEADS): one plot each. A stage without heads is one plot."""
    if not stage.per_head:
        return [0]
    if head == ALL_HEADS:
        return list(range(stage.heads))
    index = array_head(stage, head)  # the chosen query head's key/value head, for GQA
    return [index] if index < stage.heads else list(range(stage.heads))


def is_kv_stage(stage: Stage) -> bool:
    """True for a per-head stage indexed by key/value head (fewer heads than query heads)."""
    return bool(stage.per_head and stage.head_groups and stage.heads < len(stage.head_groups))


def array_head(stage: Stage, query_head: int) -> int:
    """The index into ``stage.array`` that query head ``query_head`` uses."""
    if is_kv_stage(stage):
        return stage.head_groups[query_head]
    return query_head


def query_heads_of(stage: Stage, kv_head: int) -> list[int]:
    """The query heads that read key/value head ``kv_head`` (just ``[kv_head]`` without GQA)."""
    if not is_kv_stage(stage):
        return [kv_head]
    return [q for q, g in enumerate(stage.head_groups) if g == kv_head]


def clicked_query_head(stage: Stage | None, head: int, focus: int) -> int:
    """The query head a click on plot head ``head`` means: for a key/value head of a GQA model,
    ``focus`` (the focused query head) when it reads that one, else the first that does."""
    if stage is None or not is_kv_stage(stage):
        return head
    readers = query_heads_of(stage, head)
    return focus if focus in readers else readers[0]


def _span(heads: list[int]) -> str:
    """0-based: "3", "3–4" for a run, "1, 3" otherwise."""
    first, last = heads[0], heads[-1]
    if first == last:
        return str(first)
    if last - first + 1 == len(heads):
        return f"{first}–{last}"
    return ", ".join(str(q) for q in heads)


def head_title(stage: Stage, index: int) -> str:
    """The title of plot ``index`` of a per-head stage, 0-based as numpy, PyTorch and transformers:
    "Head 3", "Head 3 (kv 2)" for a
    query head of a GQA model, "KV head 2 (heads 3–4)" for a key/value head."""
    if is_kv_stage(stage):
        return f"KV head {index} (heads {_span(query_heads_of(stage, index))})"
    if stage.head_groups and stage.heads == len(stage.head_groups) and len(set(stage.head_groups)) < stage.heads:
        return f"Head {index} (kv {stage.head_groups[index]})"
    return f"Head {index}"


def head_name(stage: Stage, index: int) -> str:
    """Lower-case, for read-outs: "head 3" or "kv head 2"."""
    return f"kv head {index}" if is_kv_stage(stage) else f"head {index}"
