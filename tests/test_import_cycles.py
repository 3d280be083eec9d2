"""No import cycles among the app's modules (imports inside functions count; ``if TYPE_CHECKING:`` blocks
do not). A cycle means two modules cannot be read, tested or changed apart."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("models", "explorer")


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imported(path: Path, module: str, typing_too: bool = False) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(body, skip: bool) -> None:
        for node in body:
            if isinstance(node, ast.If):
                test = node.test
                typing_only = "TYPE_CHECKING" in (getattr(test, "id", None), getattr(test, "attr", None))
                visit(node.body, skip or (typing_only and not typing_too))
                visit(node.orelse, skip)
            elif skip:
                continue
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
            else:
                visit([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)], skip)

    visit(ast.parse(path.read_text(encoding="utf-8")).body, False)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def import_graph(packages=PACKAGES, typing_too: bool = False) -> dict[str, set[str]]:
    files = {module_name(p): p for package in packages for p in (ROOT / package).rglob("*.py")}
    return {m: {i for i in imported(p, m, typing_too) if i in files and i != m} for m, p in files.items()}


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_in_models_and_explorer():
    graph = import_graph()
    assert len(graph) > 50  # the walk found the packages
    assert cycles(graph) == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles(graph))


def test_no_import_cycles_in_models_and_explorer_not_even_for_type_checking():
    """models/ and explorer/ have no cycle even through ``if TYPE_CHECKING:`` imports: a module that only
    names another's class in an annotation still says the two cannot be understood apart (the window's
    actions named the window, which imports them: they now name a Protocol of what they reach)."""
    graph = import_graph(typing_too=True)
    assert len(graph) > 50
    assert cycles(graph) == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles(graph))
