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
