"""The shape issue 17 asks of the code: every module readable in one sitting (at most 400 lines), and
no module importing another's private names (a name a module keeps to itself is not another's API)."""

from __future__ import annotations

import ast

from tests.test_import_cycles import PACKAGES, ROOT

MAX_LINES = 400


def modules():
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))] + [ROOT / "main.py"]


def private_imports(source: str) -> list[str]:
    """``module._name`` for each ``from module import _name`` of the app's own packages."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_the_private_import_finder_finds_one():
    assert private_imports("from models.cli.export import _error, check\nfrom .x import _y\nfrom numpy import _z") == [
        "models.cli.export._error", "x._y"]  # fmt: skip
    assert private_imports("from models.cli.export import check\nimport models._private") == []


def test_every_module_is_at_most_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert len(modules()) > 100 and long == {}


def test_no_module_imports_another_modules_private_names():
    found = {str(p.relative_to(ROOT)): names for p in modules() if (names := private_imports(p.read_text("utf-8")))}
    assert found == {}
