"""Every command of the main window, in one table: id, title, shortcut, menu and group. The callbacks
look their target up when they run (so a test may replace e.g. ``window.exports.save_image``).

Ids are ``<area>.<verb>``; docs/architecture.md ("Actions") lists them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from explorer.actions.registry import Action, ActionRegistry, Menu, StandardKey

if TYPE_CHECKING:  # none of these imports this module: no cycle, not even for type checking
    from explorer.actions.compare_actions import CompareActions
    from explorer.actions.experiment import Experiment
    from explorer.actions.export_actions import ExportActions
    from explorer.actions.file_actions import FileActions
    from explorer.actions.other_windows import OtherWindows
    from explorer.actions.session_actions import SessionActions
    from explorer.panels.why_dock import WhyDock
    from explorer.state import ExplorerState

MENUS = (Menu("file", "&File"), Menu("stage", "&Stage"), Menu("edit", "&Edit"))
PIN_TIP = "Keep this run; change anything and compare it with the new one"


class Commands(Protocol):
    """What the actions reach of the main window (explorer/window.py's MainWindow is one): this module
    names what it needs rather than importing the window, which imports it."""

    state: ExplorerState
    exports: ExportActions
    files: FileActions
    windows: OtherWindows
    why: WhyDock
    sessions: SessionActions
    compare: CompareActions
    experiment: Experiment

    def close(self) -> bool: ...


def window_actions(w: Commands) -> list[Action]:
    state = w.state
    return [
        # File: exports
        Action("file.export_matrix", "Export matrix…", lambda: w.exports.export_matrix(), "Ctrl+E",
               menu="file", group="1_export"),
        Action("file.export_all", "Export all…", lambda: w.exports.export_all(), "Ctrl+Shift+E",
               menu="file", group="1_export"),
        Action("file.save_image", "Save image…", lambda: w.exports.save_image(), ("Ctrl+Shift+S", "Ctrl+P"),
               menu="file", group="1_export"),
        Action("file.save_window_image", "Save window image…", lambda: w.exports.save_window_image(),
               menu="file", group="1_export"),
        # File: the toy engine's input files (as `main.py export` takes them)
        Action("file.open_text", "Open text…", lambda: w.files.open_text(), menu="file", group="2_files"),
        Action("file.open_embeddings", "Open embeddings…", lambda: w.files.open_embeddings(),
               menu="file", group="2_files"),
        Action("file.open_weights", "Open weights…", lambda: w.files.open_weights(), menu="file", group="2_files"),
        Action("file.open_mask", "Open mask…", lambda: w.files.open_mask(), menu="file", group="2_files"),
        Action("file.close_files", "Close opened files", lambda: w.files.close_files(), menu="file",
               group="2_files"),
        # File: other windows
        Action("file.open_attention", "Open attention…", lambda: w.windows.open_survey(path=None), menu="file",
               group="3_windows"),
        Action("view.whole_model", "Whole model (every layer and head)…", lambda: w.windows.open_survey(model=True),
               menu="file", group="3_windows"),
        Action("view.pe_lens", "Positional-encoding lens…", lambda: w.windows.open_pe_lens(), menu="file",
               group="3_windows"),
        Action("view.generate", "Generate and watch…", lambda: w.windows.open_generate(), menu="file",
               group="3_windows"),
        Action("view.why", "Why does this head attend here?…", lambda: w.why.open(), menu="file",
               group="3_windows"),
        Action("view.atlas", "Head atlas (many texts)…", lambda: w.windows.open_atlas(), menu="file",
               group="3_windows"),
        Action("view.timeline", "Training timeline…", lambda: w.windows.open_timeline(), menu="file",
               group="3_windows"),
        Action("view.time_machine", "Time machine (heads across checkpoints)…",
               lambda: w.windows.open_time_machine(), menu="file", group="3_windows"),
        # File: sessions, quit
        Action("file.open_session", "Open session…", lambda: w.sessions.open_session(),
               ("Ctrl+O", StandardKey.OPEN), menu="file", group="4_session"),
        Action("file.save_session", "Save session…", lambda: w.sessions.save_session(), StandardKey.SAVE,
               menu="file", group="4_session"),
        Action("file.quit", "Quit", lambda: w.close(), StandardKey.QUIT, menu="file", group="9_quit"),
        # Stage: window-wide stage keys (a focused line edit claims Left/Right/Home/End first, Qt's
        # ShortcutOverride, so its cursor still moves; everywhere else these step the stages)
        Action("stage.previous", "Previous stage", lambda: state.step(-1), "Left", menu="stage", group="1_step"),
        Action("stage.next", "Next stage", lambda: state.step(+1), "Right", menu="stage", group="1_step"),
        Action("stage.first", "First stage", lambda: state.step_to_end(last=False), "Home", menu="stage",
               group="1_step"),
        Action("stage.last", "Last stage", lambda: state.step_to_end(last=True), "End", menu="stage",
               group="1_step"),
        # Stage: pin a run and compare the next ones with it
        Action("stage.pin", "Pin this run", lambda: w.compare.pin(), "Ctrl+K", menu="stage", group="2_pin",
               tooltip=PIN_TIP),
        Action("stage.unpin", "Unpin", lambda: w.compare.unpin(), menu="stage", group="2_pin",
               enabled_when=lambda: w.compare.pinned is not None, enabled_text="a run is pinned"),
        # Edit: what-if edits
        Action("edit.undo", "Undo edit", lambda: w.experiment.undo(), ("Ctrl+Z", StandardKey.UNDO), menu="edit",
               enabled_when=lambda: w.state.history.can_undo, enabled_text="there are edits"),
        Action("edit.redo", "Redo edit", lambda: w.experiment.redo(), ("Ctrl+Shift+Z", StandardKey.REDO),
               menu="edit", enabled_when=lambda: w.state.history.can_redo,
               enabled_text="an edit was undone"),
        Action("edit.reset", "Reset edits", lambda: w.experiment.reset(), menu="edit",
               enabled_when=lambda: w.state.history.can_undo or w.state.history.can_redo,
               enabled_text="there are edits or undone ones"),
    ]  # fmt: skip


def window_registry(window: Commands) -> ActionRegistry:
    registry = ActionRegistry(MENUS)
    for action in window_actions(window):
        registry.register(action)
    return registry
