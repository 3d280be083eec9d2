"""The window's widgets mirror the one state (explorer/state.py): the Difference checkbox, the Edit and
Stage menus, the compare window; a session that fails puts the whole state back, undo steps included."""

from models.engine.edits import Edit
from models.files.session import Session, save_session
from models.runspec import RunSpec


def test_the_difference_checkbox_mirrors_the_state_both_ways(make_window, settle):
    window = make_window()
    window.state.add_edits([Edit("q", (0, 1, 2), 4.0)])
    window.state.set_difference(True)  # as a session's apply sets it
    assert window.experiment.difference.isChecked()
    settle(window)
    assert window.state.display.request.difference and window.state.display.trace.meta.get("difference")
    window.experiment.difference.click()  # the user unticks it
    assert window.state.difference is False
    settle(window)
    assert not window.state.display.request.difference


def test_edits_and_pins_made_on_the_state_reach_the_menus_and_the_compare_window(make_window, settle):
    window = make_window()
    window.state.add_edits([Edit("q", (0, 1, 2), 4.0)])
    assert window.menus.qaction("edit.undo").isEnabled() and not window.menus.qaction("edit.redo").isEnabled()
    settle(window)
    assert window.state.display.request.edits == (Edit("q", (0, 1, 2), 4.0),)  # the request followed
    assert window.state.pin()
    assert window.compare.view.isVisible() and window.menus.qaction("stage.unpin").isEnabled()
    window.compare.view.close()  # closing the compare window unpins
    assert window.state.pinned is None and not window.menus.qaction("stage.unpin").isEnabled()


def test_a_session_whose_run_fails_puts_back_the_undo_steps_too(make_window, settle, tmp_path):
    window = make_window()
    window.experiment.add_edit(Edit("q", (0, 1, 2), 4.0))
    window.experiment.add_edit(Edit("v", (1, 0, 0), -2.0))
    window.experiment.undo()
    settle(window)
    before = window.state.snapshot()
    path = tmp_path / "bad-edit.zip"  # read well; its run fails: a model layer's shapes are known once traced
    save_session(path, Session(RunSpec(model="minilm", layer=1, sentence="The cat sat.",
                                       edits=(Edit("q", (0, 99, 0), 1.0),))))  # fmt: skip
    assert window.sessions.open_session(str(path))
    settle(window, timeout=30_000)
    assert "the window is as it was" in window.status_line.plain_text()
    assert window.state.snapshot() == before and window.menus.qaction("edit.redo").isEnabled()
    window.registry.execute("edit.redo")
    assert window.experiment.edits == [Edit("q", (0, 1, 2), 4.0), Edit("v", (1, 0, 0), -2.0)]
