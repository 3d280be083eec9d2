"""File → Save session… / Open session… round-trip the view, the painted mask and the edits."""

import dataclasses

import numpy as np

from explorer.state import Inputs
from models.engine.edits import Edit

SMALL = Inputs(sentence="The cat sat on the mat.", heads=2, d_model=8)  # as conftest.SMALL


def test_save_then_open_restores_the_view_the_painted_mask_and_the_edits(make_window, settle, tmp_path, monkeypatch):
    window = make_window(dataclasses.replace(SMALL, mask="causal"))
    window.settings_panel.mask.setCurrentIndex(window.settings_panel.mask.findData("custom"))
    settle(window)
    window.mask_dock.painter.toggle(4, 0)
    settle(window)
    window.experiment.add_edit(Edit("k", (0, 1, 2), -3.0))
    settle(window)
    window.state.set_stage("weights")
    window.state.set_head(1)
    window.state.set_query(2)
    path = tmp_path / "s.zip"
    monkeypatch.setattr(window.sessions, "ask_path", lambda save: str(path))
    assert window.sessions.save_session()
    arrays = {s.name: s.array.copy() for s in window.state.display.trace.stages}
    painted = window.state.inputs.painted_mask

    other = make_window(dataclasses.replace(SMALL, sentence="Another sentence here.", seed=4))
    monkeypatch.setattr(other.sessions, "ask_path", lambda save: str(path))
    assert other.sessions.open_session()
    settle(other)
    assert other.state.inputs.mask == "custom" and other.state.inputs.painted_mask == painted
    assert other.state.inputs.sentence == SMALL.sentence
    assert other.experiment.edits == [Edit("k", (0, 1, 2), -3.0)]
    assert (other.state.stage_name, other.state.head, other.state.query) == ("weights", 1, 2)
    assert other.mask_dock.isVisible()
    assert np.array_equal(other.mask_dock.painter.mask(), np.array(painted))
    for name, array in arrays.items():
        assert np.array_equal(other.state.display.trace[name].array, array), name


def test_a_bad_session_file_leaves_the_window_as_it_was(make_window, settle, tmp_path):
    window = make_window()
    before = window.state.inputs
    window.experiment.add_edit(Edit("q", (0, 0, 0), 1.0))
    settle(window)
    for content in (b"not a zip", b"PK\x03\x04truncated"):
        bad = tmp_path / "bad.zip"
        bad.write_bytes(content)
        assert not window.sessions.open_session(str(bad))
        assert window.status_line.is_error and "session" in window.status_line.plain_text()
        assert "\n" not in window.status_line.plain_text()
    assert window.state.inputs == before
    assert window.experiment.edits == [Edit("q", (0, 0, 0), 1.0)]
    assert not window.sessions.open_session(str(tmp_path / "missing.zip"))
    assert window.state.inputs == before
