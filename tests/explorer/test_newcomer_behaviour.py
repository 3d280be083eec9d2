"""Issue 35, "what a newcomer trips over": behaviour (each test failed before its fix)."""

from __future__ import annotations

import sys
from pathlib import Path

from explorer.app import build_parser, inputs_from_args, run_app
from explorer.state import Inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))


def test_an_encoder_decoder_never_gets_the_toys_placeholder_as_its_target(tmp_path, capsys):
    """Item 16: without --cross-sentence the window quietly used the toy's second sentence "Das Tier
    überquerte die Straße nicht." as the model's target (export refuses the same input)."""
    from encdec_refs import SOURCE, TARGET, build

    folder = tmp_path / "tiny-t5"
    folder.mkdir()
    build(folder, "t5")
    args = build_parser().parse_args(["--model", str(folder), "--sentence", SOURCE])
    assert inputs_from_args(args, Inputs()).cross_sentence == ""
    given = build_parser().parse_args(["--model", str(folder), "--sentence", SOURCE, "--cross-sentence", TARGET])
    assert inputs_from_args(given, Inputs()).cross_sentence == TARGET
    shot = str(tmp_path / "t5.png")
    assert run_app(["--model", str(folder), "--sentence", SOURCE, "--screenshot", shot]) == 2
    assert "target sentence is empty" in capsys.readouterr().err
    assert not Path(shot).exists()


def test_the_induction_model_says_when_the_input_is_longer_than_it_was_trained_on(make_window, settle):
    """Item 17: the induction model accepts 256 tokens but was trained on 64-token sequences; past
    ~110 its previous-token head falls apart, with no word. Its training.json says 64: a notice."""
    from models.pretrained import resolve_model
    from models.pretrained.steps import step_folder
    from models.training.trained_length import length_notice, trained_length

    folder = resolve_model("induction")
    assert trained_length(folder) == 64 and trained_length(step_folder(folder, "first")) == 64
    assert trained_length(resolve_model("minilm")) is None and length_notice(resolve_model("minilm"), 500) == ""
    window = make_window(Inputs(model="induction", sentence="abc " * 30))  # 121 tokens with <s>
    assert "longer than the 64-token sequences" in window.status_line.plain_text()
    window.state.update_inputs(sentence="abc abc")
    settle(window)
    assert "longer than" not in window.status_line.plain_text()
