"""``why`` at every checkpoint: one cell's score split into query-source × key-source terms, step by
step, on a fixed text, so that a user sees which terms grow as a head takes its role.

Each step's table is :func:`models.reads.why.why`'s own (checked against that step's recorded score
as ``why`` checks it); the series keeps every (query source, key source) pair that appears at some
step, 0 where a step has no such term (a source folded into "others" at one step and not another).
"""

from __future__ import annotations

from collections.abc import Callable

from models.config import InputError
from models.pretrained.registry import resolve_model
from models.pretrained.steps import model_steps, parse_step
from models.step_names import step_of_folder


def history_of(model: str) -> tuple[str, dict[int, object]]:
    """``(folder, {step: folder})`` of the history ``model`` (a name, a folder or one of its steps) belongs to."""
    folder = resolve_model(model)
    found = step_of_folder(folder)
    root = found[0] if found else folder
    steps = model_steps(root)
    if not steps:
        raise InputError(f"{root.name} has no training steps (no checkpoints/step-N or checkpoint-N folders, "
                         f"no stepN revisions)")  # fmt: skip
    return str(root), steps


def chosen_steps(text: str, available: list[int], where: str) -> list[int]:
    """``"all"`` or a comma list of steps (``first``, ``last``, numbers), in step order, once each."""
    text = str(text).strip().lower()
    if text == "all":
        return list(available)
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise InputError("--steps needs 'all' or a comma list of steps (first, last, numbers)")
    return sorted({parse_step(p, available, where) for p in parts})


def why_over_steps(spec, head: int, row: int, col: int, steps: str = "all",
                   progress: Callable[[int, int], None] | None = None) -> dict:  # fmt: skip
    """The series ``main.py why --steps ... --json`` prints: ``steps``, ``score`` (one per step),
    ``terms`` (``{"query": q, "key": k, "values": [one per step]}`` for every pair), the row and
    column totals per step, the tokens and the relative error of each step's split."""
    from models.reads.why import why

    if not spec.model:
        raise InputError("--steps follows a model's training checkpoints; give --model")
    root, available = history_of(spec.model)
    chosen = chosen_steps(steps, list(available), root)
    results = []
    for i, step in enumerate(chosen):
        try:
            results.append(why(spec.replace(model=root, step=str(step)), head, row, col))
        except InputError as exc:
            raise InputError(f"step {step}: {exc}") from None
        if progress:
            progress(i + 1, len(chosen))
    return series(chosen, results)


def series(chosen: list[int], results: list[dict]) -> dict:
    """Stack per-step ``why`` answers into one series (pairs keyed by their sources' names)."""
    pairs: dict[tuple[str, str], list[float]] = {}
    rows: dict[str, list[float]] = {}
    cols: dict[str, list[float]] = {}
    for s, r in enumerate(results):
        for qi, q in enumerate(r["query_sources"]):
            rows.setdefault(q, [0.0] * len(results))[s] = r["row_totals"][qi]
            for ki, k in enumerate(r["key_sources"]):
                pairs.setdefault((q, k), [0.0] * len(results))[s] = r["table"][qi][ki]
        for ki, k in enumerate(r["key_sources"]):
            cols.setdefault(k, [0.0] * len(results))[s] = r["column_totals"][ki]
    first = results[0]
    return {
        "steps": chosen, "stage": first["stage"], "layer": first["layer"], "head": first["head"],
        "row": first["row"], "col": first["col"], "query_token": first["query_token"],
        "key_token": first["key_token"], "score": [r["score"] for r in results],
        "relative_error": [r["relative_error"] for r in results],
        "terms": [{"query": q, "key": k, "values": v} for (q, k), v in pairs.items()],
        "query_totals": rows, "key_totals": cols,
    }  # fmt: skip


def text(result: dict, count: int = 3) -> str:
    """A table a terminal shows: each step's score and its largest terms (signed)."""
    lines = [f"why over {len(result['steps'])} steps: layer {result['layer']} head {result['head']}, "
             f"query {result['row']} {result['query_token']!r} → key {result['col']} {result['key_token']!r} "
             f"({result['stage']})"]  # fmt: skip
    for s, step in enumerate(result["steps"]):
        terms = sorted(result["terms"], key=lambda t: -abs(t["values"][s]))[:count]
        shown = ", ".join(f"{t['query']}·{t['key']} {t['values'][s]:+.4g}" for t in terms)
        lines.append(f"  step {step:>6}: score {result['score'][s]:+.4f} = {shown}, ...")
    return "\n".join(lines) + "\n"
