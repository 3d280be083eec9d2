"""Actions registered once by id, in the shape of napari's app-model: each is data (id, title,
shortcut, menu placement, enabled-when) with the callback it runs. Menus are built from the
registry (explorer.actions.menus) and tests run an action by id with :meth:`ActionRegistry.execute`,
exactly as its menu entry or shortcut does.

Qt-free (psygnal for the one event), so that it can be read and tested without a window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from psygnal import Signal


class StandardKey(str, Enum):
    """A key of Qt's ``QKeySequence.StandardKey``: the platform's own keys for it (Ctrl+O on Linux and
    Windows, ⌘O on macOS). Named here, so that the registry stays Qt-free."""

    OPEN = "Open"
    SAVE = "Save"
    UNDO = "Undo"
    REDO = "Redo"
    QUIT = "Quit"


Shortcut = str | StandardKey  # "Ctrl+Shift+E" (QKeySequence's portable text) or a standard key


@dataclass(frozen=True)
class Menu:
    id: str  # "file"
    title: str  # "&File" (with its mnemonic)


@dataclass(frozen=True)
class Action:
    """One command. ``callback()`` runs it (``callback(checked)`` when ``checkable``). In ``menu``, actions
    are ordered by ``group`` then ``order`` (then registration), with a separator between groups.
    ``enabled_when()`` / ``checked_when()`` are evaluated again on :meth:`ActionRegistry.refresh`."""

    id: str  # "file.save_image": <menu or area>.<verb>
    title: str
    callback: Callable[..., object]
    shortcut: tuple[Shortcut, ...] | Shortcut | None = None  # the first is the one a menu shows
    menu: str | None = None
    group: str = ""
    order: float = 0.0
    enabled_when: Callable[[], bool] | None = None
    checkable: bool = False
    checked_when: Callable[[], bool] | None = None
    tooltip: str = ""
    enabled_text: str = ""  # enabled_when in words: the "enabled when" column of docs/architecture.md

    @property
    def shortcuts(self) -> tuple[Shortcut, ...]:
        if self.shortcut is None:
            return ()
        return self.shortcut if isinstance(self.shortcut, tuple) else (self.shortcut,)


class ActionRegistry:
    """Every action of the window by id, and the menus they go in (in menu-bar order)."""

    changed = Signal()  # enabled-when / checked-when may give other answers now

    def __init__(self, menus: tuple[Menu, ...] = ()):
        self.menus: tuple[Menu, ...] = tuple(menus)
        self._actions: dict[str, Action] = {}

    def register(self, action: Action) -> Action:
        if action.id in self._actions:
            raise ValueError(f"action {action.id!r} is registered already")
        if action.menu is not None and action.menu not in {m.id for m in self.menus}:
            raise ValueError(f"action {action.id!r}: no menu {action.menu!r}")
        self._actions[action.id] = action
        return action

    def __getitem__(self, action_id: str) -> Action:
        try:
            return self._actions[action_id]
        except KeyError:
            raise KeyError(f"no action {action_id!r}") from None

    def __contains__(self, action_id: object) -> bool:
        return action_id in self._actions

    def __iter__(self) -> Iterator[Action]:
        return iter(self._actions.values())

    def __len__(self) -> int:
        return len(self._actions)

    def in_menu(self, menu_id: str) -> list[Action]:
        """The actions of one menu, in the order they are shown."""
        placed = [(i, a) for i, a in enumerate(self._actions.values()) if a.menu == menu_id]
        return [a for _i, a in sorted(placed, key=lambda p: (p[1].group, p[1].order, p[0]))]

    def is_enabled(self, action_id: str) -> bool:
        when = self[action_id].enabled_when
        return True if when is None else bool(when())

    def is_checked(self, action_id: str) -> bool:
        action = self[action_id]
        return action.checkable and action.checked_when is not None and bool(action.checked_when())

    def execute(self, action_id: str, checked: bool | None = None) -> object:
        """Run an action as its menu entry or shortcut does; a disabled one does nothing (None).
        A checkable one is handed ``checked`` (by default: the opposite of its checked state)."""
        action = self[action_id]
        if not self.is_enabled(action_id):
            return None
        if action.checkable:
            return action.callback(not self.is_checked(action_id) if checked is None else checked)
        return action.callback()

    def refresh(self, *_args) -> None:
        """Something an enabled-when or checked-when reads has changed: menus evaluate them again."""
        self.changed.emit()
