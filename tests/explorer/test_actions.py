"""Actions registered once by id (explorer.actions): the registry without Qt, the menus built from it,
and every command of the window, run by id as its menu entry or shortcut runs it."""

import pytest

from explorer.actions import Action, ActionRegistry, Menu, StandardKey
from models.engine.edits import Edit

MENUS = (Menu("file", "&File"), Menu("edit", "&Edit"))


# --- the registry (no Qt) ------------------------------------------------------------------
def test_an_id_is_registered_once_and_only_in_a_known_menu():
    registry = ActionRegistry(MENUS)
    registry.register(Action("file.a", "A", lambda: None, menu="file"))
    with pytest.raises(ValueError, match="registered already"):
        registry.register(Action("file.a", "A again", lambda: None))
    with pytest.raises(ValueError, match="no menu 'view'"):
        registry.register(Action("view.b", "B", lambda: None, menu="view"))
    with pytest.raises(KeyError, match="no action 'file.nope'"):
        registry.execute("file.nope")
    assert "file.a" in registry and len(registry) == 1


def test_menu_order_is_group_then_order_then_registration():
    registry = ActionRegistry(MENUS)
    for action_id, group, order in (("c", "2", 0), ("a", "1", 5), ("b", "1", 1), ("d", "2", 0)):
        registry.register(Action(action_id, action_id.upper(), lambda: None, menu="file", group=group, order=order))
    assert [a.id for a in registry.in_menu("file")] == ["b", "a", "c", "d"]
    assert registry.in_menu("edit") == []


def test_execute_runs_the_callback_unless_disabled_and_refresh_tells_the_menus():
    registry = ActionRegistry(MENUS)
    calls, allowed, events = [], [False], []
    registry.register(Action("edit.go", "Go", lambda: calls.append(1) or "done", enabled_when=lambda: allowed[0]))
    registry.changed.connect(lambda: events.append(1))
    assert registry.execute("edit.go") is None and calls == []  # disabled: as a greyed-out menu entry
    allowed[0] = True
    registry.refresh()
    assert events == [1] and registry.is_enabled("edit.go")
    assert registry.execute("edit.go") == "done" and calls == [1]


def test_a_checkable_action_is_handed_its_new_state():
    registry = ActionRegistry(MENUS)
    on = [False]
    registry.register(Action("edit.toggle", "Toggle", lambda checked: on.__setitem__(0, checked), checkable=True,
                             checked_when=lambda: on[0]))  # fmt: skip
    registry.execute("edit.toggle")
    assert on == [True] and registry.is_checked("edit.toggle")
    registry.execute("edit.toggle")
    assert on == [False]
    registry.execute("edit.toggle", checked=False)
    assert on == [False]


def test_the_registry_is_qt_free():
    import subprocess
    import sys

    code = "import sys, explorer.actions.registry; print(any(m.startswith('PySide6') for m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# --- menus built from it ---------------------------------------------------------------------
def test_menus_are_built_with_separators_standard_keys_and_live_enabled_states(qtbot):
    from PySide6.QtGui import QKeySequence
    from PySide6.QtWidgets import QMainWindow

    from explorer.actions.menus import build_menus, key_sequences

    window = QMainWindow()
    qtbot.addWidget(window)
    registry, calls, edits = ActionRegistry(MENUS), [], []
    registry.register(Action("file.open", "Open…", lambda: calls.append("open"), ("Ctrl+O", StandardKey.OPEN),
                             menu="file", group="1"))  # fmt: skip
    registry.register(Action("file.quit", "Quit", lambda: calls.append("quit"), menu="file", group="9"))
    registry.register(Action("edit.undo", "Undo", lambda: calls.append("undo"), ("Ctrl+Z", StandardKey.UNDO),
                             menu="edit", enabled_when=lambda: bool(edits), tooltip="Take it back"))  # fmt: skip
    registry.register(Action("edit.flip", "Flip", lambda checked: edits.append(checked), menu="edit",
                             checkable=True, checked_when=lambda: bool(edits)))  # fmt: skip
    menus = build_menus(window.menuBar(), registry)
    assert [a.text() for a in window.menuBar().actions()] == ["&File", "&Edit"]
    assert [a.text() for a in menus.menus["file"].actions()] == ["Open…", "", "Quit"]  # a separator between groups
    undo = menus.qaction("edit.undo")
    assert undo.shortcut().toString() == "Ctrl+Z"  # the explicit key first: the one the menu shows
    standard = {k.toString() for k in QKeySequence.keyBindings(QKeySequence.StandardKey.Undo)}
    assert standard <= {k.toString() for k in undo.shortcuts()}  # and the platform's own keys
    assert [k.toString() for k in key_sequences(("Ctrl+Z", "Ctrl+Z"))] == ["Ctrl+Z"]
    assert undo.toolTip() == "Take it back" and not undo.isEnabled()
    undo.trigger()
    assert calls == []  # disabled: nothing happens
    menus.qaction("file.open").trigger()
    assert calls == ["open"]
    menus.qaction("edit.flip").trigger()  # checkable: handed True, then enabled-when and checked re-read
    registry.refresh()
    assert edits == [True] and undo.isEnabled() and menus.qaction("edit.flip").isChecked()


# --- the window's actions ------------------------------------------------------------------------
WINDOW_ACTIONS = {  # id: (title, the shortcuts it had before the registry, menu)
    "file.export_matrix": ("Export matrix…", ["Ctrl+E"], "file"),
    "file.export_all": ("Export all…", ["Ctrl+Shift+E"], "file"),
    "file.save_image": ("Save image…", ["Ctrl+Shift+S", "Ctrl+P"], "file"),
    "file.save_window_image": ("Save window image…", [], "file"),
    "file.open_embeddings": ("Open embeddings…", [], "file"),
    "file.open_weights": ("Open weights…", [], "file"),
    "file.open_mask": ("Open mask…", [], "file"),
    "file.open_text": ("Open text…", [], "file"),
    "file.close_files": ("Close opened files", [], "file"),
    "file.open_attention": ("Open attention…", [], "file"),
    "view.whole_model": ("Whole model (every layer and head)…", [], "file"),
    "view.pe_lens": ("Positional-encoding lens…", [], "file"),
    "view.generate": ("Generate and watch…", [], "file"),
    "view.why": ("Why does this head attend here?…", [], "file"),
    "view.atlas": ("Head atlas (many texts)…", [], "file"),
    "view.timeline": ("Training timeline…", [], "file"),
    "view.time_machine": ("Time machine (heads across checkpoints)…", [], "file"),
    "file.open_session": ("Open session…", ["Ctrl+O"], "file"),
    "file.save_session": ("Save session…", [], "file"),
    "file.quit": ("Quit", [], "file"),
    "stage.previous": ("Previous stage", ["Left"], "stage"),
    "stage.next": ("Next stage", ["Right"], "stage"),
    "stage.first": ("First stage", ["Home"], "stage"),
    "stage.last": ("Last stage", ["End"], "stage"),
    "stage.pin": ("Pin this run", ["Ctrl+K"], "stage"),
    "stage.unpin": ("Unpin", [], "stage"),
    "edit.undo": ("Undo edit", ["Ctrl+Z"], "edit"),
    "edit.redo": ("Redo edit", ["Ctrl+Shift+Z"], "edit"),
    "edit.reset": ("Reset edits", [], "edit"),
}


def test_every_window_action_keeps_its_title_shortcut_and_menu(make_window):
    window = make_window()
    registry, menus = window.registry, window.menus
    assert {a.id for a in registry} == set(WINDOW_ACTIONS)
    seen: dict[str, str] = {}
    for action_id, (title, keys, menu) in WINDOW_ACTIONS.items():
        action, qaction = registry[action_id], menus.qaction(action_id)
        assert (action.title, action.menu, qaction.text()) == (title, menu, title), action_id
        shortcuts = [k.toString() for k in qaction.shortcuts()]
        assert shortcuts[: len(keys)] == keys, action_id  # the old keys first (then the platform's standard ones)
        for key in shortcuts:
            assert seen.setdefault(key, action_id) == action_id, f"{key} is {seen[key]}'s and {action_id}'s"
    texts = lambda menu: [a.text() for a in menus.menus[menu].actions()]  # noqa: E731
    assert [a.text() for a in window.menuBar().actions()] == ["&File", "&Stage", "&Edit"]
    assert texts("file") == ["Export matrix…", "Export all…", "Save image…", "Save window image…", "",
                             "Open text…", "Open embeddings…", "Open weights…", "Open mask…", "Close opened files",
                             "",
                             "Open attention…", "Whole model (every layer and head)…", "Positional-encoding lens…",
                             "Generate and watch…", "Why does this head attend here?…", "Head atlas (many texts)…",
                             "Training timeline…", "Time machine (heads across checkpoints)…", "", "Open session…",
                             "Save session…",
                             "", "Quit"]  # fmt: skip
    assert texts("stage") == ["Previous stage", "Next stage", "First stage", "Last stage", "", "Pin this run", "Unpin"]
    assert texts("edit") == ["Undo edit", "Redo edit", "Reset edits"]


def test_stage_actions_step_by_id(make_window):
    window = make_window(stage="weights")
    names = window.state.display.trace.names
    window.registry.execute("stage.first")
    assert window.state.stage_name == names[0]
    window.registry.execute("stage.next")
    assert window.state.stage_name == names[1]
    window.registry.execute("stage.last")
    assert window.state.stage_name == names[-1]
    window.registry.execute("stage.previous")
    assert window.state.stage_name == names[-2]


def test_edit_actions_follow_the_edits(make_window, settle):
    window = make_window()
    enabled = lambda: {i: window.menus.qaction(i).isEnabled() for i in ("edit.undo", "edit.redo", "edit.reset")}  # noqa: E731
    assert enabled() == {"edit.undo": False, "edit.redo": False, "edit.reset": False}
    window.experiment.add_edit(Edit("q", (0, 1, 2), 4.0))
    assert enabled() == {"edit.undo": True, "edit.redo": False, "edit.reset": True}
    settle(window)
    window.registry.execute("edit.undo")
    assert window.experiment.edits == [] and enabled() == {"edit.undo": False, "edit.redo": True, "edit.reset": True}
    settle(window)
    window.registry.execute("edit.redo")
    assert len(window.experiment.edits) == 1
    settle(window)
    window.registry.execute("edit.reset")
    assert window.experiment.edits == [] and not any(enabled().values())
    settle(window)


def test_pin_and_unpin_by_id(make_window, settle):
    window = make_window()
    assert not window.registry.is_enabled("stage.unpin")
    assert window.registry.execute("stage.pin") is True
    assert window.compare.pinned is window.state.display and window.menus.qaction("stage.unpin").isEnabled()
    window.registry.execute("stage.unpin")
    assert window.compare.pinned is None and not window.menus.qaction("stage.unpin").isEnabled()


def test_file_actions_run_by_id_reach_their_dialogs(make_window, monkeypatch):
    window = make_window()
    asked = []
    monkeypatch.setattr(window.files, "ask_path", lambda caption, _filter: asked.append(caption))
    monkeypatch.setattr(window.sessions, "ask_path", lambda save: asked.append(f"session save={save}"))
    for action_id in ("file.open_embeddings", "file.open_weights", "file.open_mask", "file.open_session",
                      "file.save_session"):  # fmt: skip
        window.registry.execute(action_id)
    assert asked == ["Open embeddings (n × d_model)", "Open projection weights", "Open mask (boolean, True = hidden)",
                     "session save=False", "session save=True"]  # fmt: skip


def test_the_pe_lens_opens_by_id(qtbot, make_window):
    window = make_window()
    lens = window.registry.execute("view.pe_lens")  # a top-level window, closed with the main window
    assert lens is window.windows.pe_lens and lens.isVisible()


def test_closing_the_main_window_closes_the_windows_it_opened(qtbot, make_window):
    """The lens, the generation window and the others close with the main window (their worker
    threads stop as they close), not only when the app's own exit path remembers them."""
    window = make_window()
    lens = window.registry.execute("view.pe_lens")
    generate = window.registry.execute("view.generate")
    second = window.registry.execute("view.generate")  # two at once: both go
    assert lens.isVisible() and generate.isVisible() and second.isVisible() and second is not generate
    window.close()
    assert not lens.isVisible() and not generate.isVisible() and not second.isVisible()
