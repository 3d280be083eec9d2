"""The explorer's tests read public, documented API: no private attribute of an app object, and the
action modules are handed what they need, never the main window."""

import ast
import inspect
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _private_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        name = node.attr if isinstance(node, ast.Attribute) else None
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "getattr", "setattr", "hasattr"
        ) and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):  # fmt: skip
            name = node.args[1].value
        if isinstance(name, str) and name.startswith("_") and not name.startswith("__"):
            found.append(f"{path.name}:{node.lineno} {name}")
    return found


def test_no_test_reads_a_private_field():
    assert [site for path in sorted(HERE.glob("*.py")) for site in _private_reads(path)] == []


def test_the_action_modules_are_not_handed_the_window():
    from explorer.actions.compare_actions import CompareActions
    from explorer.actions.experiment import Experiment
    from explorer.actions.file_actions import FileActions
    from explorer.actions.hide_keys import KeyHider
    from explorer.actions.session_actions import SessionActions
    from explorer.panels.mask_dock import MaskDock

    for cls in (Experiment, CompareActions, SessionActions, FileActions, KeyHider, MaskDock):
        assert "window" not in inspect.signature(cls.__init__).parameters, cls.__name__
        source = inspect.getsource(inspect.getmodule(cls))
        assert "self.window_" not in source and "menuBar" not in source, cls.__name__
