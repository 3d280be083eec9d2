"""An encoder-decoder model in the window: the two sentences, the block chooser, the three-row model view."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from explorer.state import Inputs
from models.pretrained import load_model

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from encdec_refs import SOURCE, TARGET, build  # noqa: E402


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models") / "tiny-t5"
    folder.mkdir()
    build(folder, "t5")
    return folder


@pytest.fixture(scope="module")
def reference(t5_folder):
    return load_model(t5_folder, device="cpu")


def encdec_inputs(folder, **more) -> Inputs:
    return Inputs(sentence=SOURCE, cross_sentence=TARGET, model=str(folder), **more)


def test_the_cross_block_by_default_with_both_sentences(make_window, settle, t5_folder, reference):
    window = make_window(encdec_inputs(t5_folder, layer=1), persist=False)
    trace = window.state.display.trace
    assert trace.config["block"] == "cross" and trace.config["layer"] == 1
    assert trace.query_tokens == reference.trace(SOURCE, 1, cross_sentence=TARGET).query_tokens
    expected = reference.trace(SOURCE, 1, cross_sentence=TARGET)["weights"].array
    np.testing.assert_allclose(trace["weights"].array, expected, atol=1e-6)  # the worker may use other threads
    chooser, panel = window.model_chooser, window.sentence_panel
    assert chooser.block.isVisibleTo(chooser) and chooser.block.currentData() == "cross"
    assert panel.cross_edit.isEnabled() and "Target" in panel.cross_edit.placeholderText()
    assert not window.settings_panel.mask.isEnabled()  # only the model's own masks
    assert "cross block layer 1" in window.status_line.plain_text()


def test_choosing_a_block_and_typing_a_target(qtbot, make_window, settle, t5_folder, reference):
    window = make_window(encdec_inputs(t5_folder), persist=False)
    block = window.model_chooser.block
    index = block.findData("decoder")
    block.setCurrentIndex(index)
    block.activated.emit(index)
    settle(window)
    trace = window.state.display.trace
    assert trace.config["block"] == "decoder" and trace.key_tokens == trace.query_tokens
    assert np.all(np.triu(trace["weights"].array, 1) == 0)  # causal
    window.sentence_panel.cross_edit.setText("die matte")
    window.sentence_panel.flush()
    settle(window)
    trace = window.state.display.trace
    assert trace.query_tokens == ("die", "matte", "</s>")
    expected = reference.trace(SOURCE, 0, cross_sentence="die matte", block="decoder")["weights"].array
    np.testing.assert_allclose(trace["weights"].array, expected, atol=1e-6)  # the worker may use other threads


def test_a_decoder_only_model_keeps_the_second_box_off(make_window, tmp_path):
    window = make_window(Inputs(sentence="The cat sat.", model="minilm"), persist=False)
    assert not window.sentence_panel.cross_edit.isEnabled()
    assert not window.model_chooser.block.isVisibleTo(window.model_chooser)
    assert window.settings_panel.mask.isEnabled()


def test_whole_model_view_has_three_rows_of_blocks(qtbot, make_window, t5_folder, reference):
    window = make_window(encdec_inputs(t5_folder), persist=False)
    survey = window.windows.open_survey(model=True)
    qtbot.addWidget(survey)
    qtbot.waitUntil(lambda: all(p.survey is not None for p in survey.panels.values()), timeout=60_000)
    assert list(survey.panels) == ["encoder", "decoder", "cross"]
    for block, panel in survey.panels.items():
        _, _, weights, _ = reference.layer_weights(SOURCE, cross_sentence=TARGET, block=block)
        np.testing.assert_allclose(panel.survey.weights, weights, atol=1e-6)
        assert panel.model_view.layers == reference.block_layers(block)
        assert panel.model_view.painted_layers == reference.block_layers(block)
    cross = survey.panels["cross"].survey
    assert not cross.square and cross.rollout is None and len(cross.key_tokens) == len(reference.encode(SOURCE).ids)
    survey.panels["encoder"].head_chosen.emit(1, 2)
    assert window.state.inputs.block == "encoder" and window.state.inputs.layer == 1 and window.state.head == 2
    survey.close()


def test_command_line_block_and_target(t5_folder):
    from explorer.app import UsageError, build_parser, inputs_from_args

    args = build_parser().parse_args(["--model", str(t5_folder), "--sentence", SOURCE, "--cross-sentence", TARGET,
                                      "--block", "encoder", "--layer", "1"])  # fmt: skip
    inputs = inputs_from_args(args, Inputs())
    assert inputs.block == "encoder" and inputs.cross_sentence == TARGET and inputs.layer == 1
    bad = build_parser().parse_args(["--model", "minilm", "--sentence", "a", "--block", "cross"])
    with pytest.raises(UsageError, match="--block needs an encoder-decoder"):
        inputs_from_args(bad, Inputs())
    bad = build_parser().parse_args(["--model", "minilm", "--sentence", "a", "--cross-sentence", "b"])
    with pytest.raises(UsageError, match="--cross-sentence applies with --model only to encoder-decoder"):
        inputs_from_args(bad, Inputs())


def test_a_session_keeps_the_target_and_the_block(t5_folder, reference, tmp_path):
    from explorer.files.session_io import open_window_session, save_window_session
    from models.files.session import load_session

    inputs = encdec_inputs(t5_folder, layer=2, block="decoder")
    path = tmp_path / "s.json"
    save_window_session(str(path), inputs)
    shown = open_window_session(str(path), Inputs())
    assert shown.inputs.block == "decoder" and shown.inputs.cross_sentence == TARGET and shown.inputs.layer == 2
    trace = load_session(str(path)).trace()
    expected = reference.trace(SOURCE, 2, cross_sentence=TARGET, block="decoder")["weights"].array
    np.testing.assert_allclose(trace["weights"].array, expected, atol=1e-6)  # the worker may use other threads


def test_a_cell_of_the_cross_block_is_explained_in_the_window(make_window, t5_folder):
    from models.reads.explain import explain

    window = make_window(encdec_inputs(t5_folder, layer=1), persist=False)
    display = window.state.display
    assert display.params is not None  # the inspector can derive every cell
    d = explain(display.trace, display.params, "q", (0, 2, 1))
    assert d.value == float(display.trace["q"].array[0, 2, 1])
    assert "query_input" in d.steps[0]  # the cross block's queries come from the decoder's rows


def test_the_block_survives_a_restart_and_a_bad_one_is_dropped():
    from explorer.files.persistence import inputs_from_dict

    assert inputs_from_dict({"block": "decoder"}).block == "decoder"
    assert inputs_from_dict({"block": "middle"}).block == "cross"


def test_a_saved_runspec_keeps_the_target_and_block_of_an_encoder_decoder_only(t5_folder):
    from explorer.files.session_io import spec_to_save
    from models.runspec import RunSpec

    run = spec_to_save(RunSpec(model=str(t5_folder), layer=1, sentence=SOURCE, cross_sentence=TARGET, block="encoder"))
    assert (run.cross_sentence, run.block) == (TARGET, "encoder")
    run = spec_to_save(RunSpec(model="minilm", layer=1, sentence="a b", cross_sentence="c d", block="cross"))
    assert (run.cross_sentence, run.block) == (None, None) and run.validate() is run


def test_each_row_of_the_whole_model_window_is_a_pane_of_the_state(qtbot, make_window, settle, t5_folder):
    """Issue 32: the encoder-decoder whole-model window's three rows kept their options and status lines
    in panes of their own, outside the state; they are the state's ``survey_rows``, each change announced."""
    from test_state_events import steps

    window = make_window(encdec_inputs(t5_folder), persist=False)
    rows, step, survey = window.state.survey_rows, steps(window, settle), None

    def opened():
        nonlocal survey
        survey = window.windows.open_survey(model=True)
        qtbot.addWidget(survey)
        qtbot.waitUntil(lambda: all(p.survey is not None and not p.busy for p in survey.panels.values()),
                        timeout=60_000)  # fmt: skip

    step("opened", opened)
    for block, panel in survey.panels.items():
        pane = getattr(rows, block)
        assert panel.pane is pane and pane.status == panel.source_label.text() != pane.idle_status
    cross, encoder = survey.panels["cross"], survey.panels["encoder"]
    step("a metric in the cross row", lambda: cross.model_view.metric_box.setCurrentIndex(1))
    assert rows.cross.form.metric == cross.model_view.metric_box.itemText(1) != rows.encoder.form.metric
    step("the encoder's scale, in code", lambda: (rows.encoder.update_form(fit_each=False), encoder.wait_until_shown()))
    assert not encoder.model_view.fit_box.isChecked() and cross.model_view.fit_box.isChecked()
    step("closed", survey.close)
    assert all(getattr(rows, block).status == getattr(rows, block).idle_status for block in rows.BLOCKS)
