"""The menu bar built from an :class:`~explorer.actions.registry.ActionRegistry`: one QMenu per menu,
one QAction per action (separators between groups), shortcuts as Qt's standard keys where the
action names one, enabled and checked states evaluated again on every ``registry.changed``."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar

from explorer.actions.registry import Action, ActionRegistry, Shortcut, StandardKey


def key_sequences(shortcuts: tuple[Shortcut, ...]) -> list[QKeySequence]:
    """Each shortcut's key sequences, in order, once each (a standard key gives the platform's own:
    Redo is Ctrl+Y and Ctrl+Shift+Z on Windows, Ctrl+Shift+Z on KDE, ⇧⌘Z on macOS)."""
    found: dict[str, QKeySequence] = {}
    for shortcut in shortcuts:
        if isinstance(shortcut, StandardKey):
            keys = QKeySequence.keyBindings(getattr(QKeySequence.StandardKey, shortcut.value))
        else:
            keys = [QKeySequence(shortcut)]
        for key in keys:
            if not key.isEmpty():
                found.setdefault(key.toString(), key)
    return list(found.values())


class MenuActions:
    """The QMenus and QActions built from a registry, kept in step with it."""

    def __init__(self, menubar: QMenuBar, registry: ActionRegistry):
        self.registry = registry
        self.menus: dict[str, QMenu] = {}
        self._qactions: dict[str, QAction] = {}
        for menu in registry.menus:
            qmenu = self.menus[menu.id] = menubar.addMenu(menu.title)
            group = None
            for action in registry.in_menu(menu.id):
                if group is not None and action.group != group:
                    qmenu.addSeparator()
                group = action.group
                qmenu.addAction(self._make(action, qmenu))
        window = menubar.parentWidget()
        for action in registry:  # a shortcut without a menu entry: the window's own action
            if action.menu is None and window is not None:
                window.addAction(self._make(action, window))
        registry.changed.connect(self.refresh)
        self.refresh()

    def qaction(self, action_id: str) -> QAction:
        """The QAction of an action (its shortcuts, enabled state and text, as Qt shows them)."""
        return self._qactions[action_id]

    def refresh(self) -> None:
        for action_id, qaction in self._qactions.items():
            qaction.setEnabled(self.registry.is_enabled(action_id))
            if qaction.isCheckable():
                qaction.setChecked(self.registry.is_checked(action_id))

    def _make(self, action: Action, parent) -> QAction:
        qaction = QAction(action.title, parent)
        qaction.setObjectName(action.id)
        qaction.setShortcuts(key_sequences(action.shortcuts))
        # Window-wide: a focused line edit still claims Left/Right/Home/End (and Ctrl+Z) first.
        qaction.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        if action.tooltip:
            qaction.setToolTip(action.tooltip)
        qaction.setCheckable(action.checkable)
        if action.checkable:
            qaction.triggered.connect(lambda checked, i=action.id: self.registry.execute(i, checked))
        else:
            qaction.triggered.connect(lambda _checked=False, i=action.id: self.registry.execute(i))
        self._qactions[action.id] = qaction
        return qaction


def build_menus(menubar: QMenuBar, registry: ActionRegistry) -> MenuActions:
    """Add the registry's menus to ``menubar`` (in its order) and return them with their QActions."""
    return MenuActions(menubar, registry)
