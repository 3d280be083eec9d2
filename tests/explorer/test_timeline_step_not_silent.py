"""A setting of the training timeline (its checkpoint step) does not reach the Generate window's next
launch without a word (issue 35 item 15): the slider moved to step 5, the window closed (its inputs
saved), the next launch's Generate window generated with that untrained checkpoint and said nothing."""

from __future__ import annotations

import dataclasses

from explorer.files.persistence import load_inputs, open_settings
from explorer.window import MainWindow
from models.step_names import checkpoint_note
from tests.explorer.conftest import SMALL


def test_a_timeline_step_remembered_for_the_next_launch_is_said_in_the_generate_window(qtbot, settle,
                                                                                       isolated_settings):  # fmt: skip
    window = MainWindow(open_settings(isolated_settings), dataclasses.replace(SMALL, model="induction",
                                                                             sentence="abcab"))  # fmt: skip
    qtbot.addWidget(window)
    window.show()
    settle(window)
    timeline = window.windows.open_timeline()  # closed with its main window (explorer/actions/other_windows.py)
    timeline.set_step(5)
    settle(window)
    window.close()  # the inputs are saved: the model is step 5's folder
    remembered = load_inputs(open_settings(isolated_settings)).model
    assert remembered.endswith("step-000005")

    again = MainWindow(open_settings(isolated_settings))  # the next launch
    qtbot.addWidget(again)
    panel = again.windows.open_generate().panel  # closed with its main window
    assert panel.model_edit.text() == remembered
    panel.new_tokens.setValue(2)
    panel.generate(now=True)
    said = "induction at training step 5: a checkpoint from its training, not the trained model"
    assert panel.view is not None and said in panel.status.text()


def test_only_a_checkpoint_is_said_to_be_one(tmp_path):
    assert checkpoint_note(tmp_path / "run" / "checkpoints" / "step-000040").startswith("run at training step 40")
    for model in ("induction", "", str(tmp_path / "step-000040"), str(tmp_path / "checkpoints")):
        assert checkpoint_note(model) == ""
