"""docs/architecture.md's table of actions, made from the window's registry (explorer/actions/window_actions.py).

The page listed 26 of the window's 29 actions (the atlas, the timeline and the time machine were missing):
here the table is rendered from the registry and the page must hold it as rendered.
``python tests/explorer/test_actions_table.py`` writes the table into the page."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from explorer.actions.registry import ActionRegistry, StandardKey
from explorer.actions.window_actions import window_registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
BEGIN = "<!-- the actions: written by tests/explorer/test_actions_table.py -->"
END = "<!-- end of the actions -->"


def _keys(shortcuts) -> str:
    return ", ".join(f"std: {k.value}" if isinstance(k, StandardKey) else k for k in shortcuts)


def _row(cells) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def render(registry: ActionRegistry | None = None) -> str:
    """The table, in registration order (the window's own; the callbacks are never run)."""
    registry = registry or window_registry(SimpleNamespace(state=None))
    menus = {m.id: m.title.replace("&", "") for m in registry.menus}
    rows = [_row((f"`{a.id}`", a.title, _keys(a.shortcuts), menus.get(a.menu, ""), a.enabled_text)) for a in registry]
    return "\n".join([BEGIN, "| id | title | shortcut | menu | enabled when |", "|---|---|---|---|---|", *rows, END])


def test_every_action_with_an_enabled_when_says_it_in_words():
    registry = window_registry(SimpleNamespace(state=None))
    assert len(registry) > 0
    for action in registry:
        assert bool(action.enabled_text) == (action.enabled_when is not None), action.id


def test_the_page_lists_every_action_of_the_registry_as_rendered():
    page = DOC.read_text(encoding="utf-8")
    table = render()
    for action in window_registry(SimpleNamespace(state=None)):
        assert f"| `{action.id}` |" in table
    assert table in page, "docs/architecture.md's actions are stale: python tests/explorer/test_actions_table.py"


if __name__ == "__main__":
    text = DOC.read_text(encoding="utf-8")
    found = re.search(re.escape(BEGIN) + ".*?" + re.escape(END), text, re.S)
    if found is None:  # the hand-written table before it was generated
        found = re.search(r"\| id \| title \| shortcut \| menu \| enabled when \|\n(\|.*\|\n)+", text)
        DOC.write_text(text.replace(found.group(0), render() + "\n"), encoding="utf-8")
    else:
        DOC.write_text(text.replace(found.group(0), render()), encoding="utf-8")
