"""The window's commands as data: registered once by id (title, shortcut, menu, enabled-when) and
run by id; the menu bar is built from them. See docs/architecture.md, "Actions"."""

from explorer.actions.registry import Action, ActionRegistry, Menu, StandardKey

__all__ = ["Action", "ActionRegistry", "Menu", "StandardKey"]
