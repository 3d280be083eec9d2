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
    from models.pretrained.trained_length import length_notice, trained_length

    folder = resolve_model("induction")
    assert trained_length(folder) == 64 and trained_length(step_folder(folder, "first")) == 64
    assert trained_length(resolve_model("minilm")) is None and length_notice(resolve_model("minilm"), 500) == ""
    window = make_window(Inputs(model="induction", sentence="abc " * 30))  # 121 tokens with <s>
    assert "longer than the 64-token sequences" in window.status_line.plain_text()
    window.state.update_inputs(sentence="abc abc")
    settle(window)
    assert "longer than" not in window.status_line.plain_text()


LDD = """\
	linux-vdso.so.1 (0x00007ffd)
	libQt6XcbQpa.so.6 => /venv/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f31)
	libxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f31)
	libxcb-icccm.so.4 => not found
	libxcb-keysyms.so.1 => not found
	libxkbcommon-x11.so.0 => not found
	libxcb-icccm.so.4 => not found
"""


def test_make_run_names_the_xcb_plugins_missing_libraries_and_the_apt_line():
    """Item 10: `make run` aborted on a fresh Debian 12 / Ubuntu desktop with Qt's message blaming
    libxcb-cursor0 (installed); libxcb-icccm4 and libxcb-keysyms1 were missing."""
    import subprocess

    from explorer import xcb_check

    assert xcb_check.missing_libraries(LDD) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxkbcommon-x11.so.0"]
    assert xcb_check.debian_package("libxcb-icccm.so.4") == "libxcb-icccm4"
    assert xcb_check.debian_package("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"

    def fake_ldd(argv, **_kw):
        assert argv[0] == "ldd" and argv[1].endswith("libqxcb.so")
        return subprocess.CompletedProcess(argv, 0, stdout=LDD, stderr="")

    message = xcb_check.check({}, run=fake_ldd)
    assert message.splitlines()[-1].strip() == "sudo apt install libxcb-icccm4 libxcb-keysyms1 libxkbcommon-x11-0"
    assert xcb_check.check({"QT_QPA_PLATFORM": "offscreen"}, run=fake_ldd) == ""
    ok = subprocess.CompletedProcess([], 0, stdout=LDD.replace("not found", "/lib/x.so"), stderr="")
    assert xcb_check.check({}, run=lambda argv, **_kw: ok) == ""
    root = Path(__file__).resolve().parents[2]
    makefile = (root / "Makefile").read_text()
    run = makefile[makefile.index("\nrun:"):makefile.index("\ntest:")]
    assert run.index("explorer.xcb_check") < run.index("main.py")
    assert "sudo apt install libxcb-icccm4 libxcb-keysyms1" in (root / "README.md").read_text()


def test_toy_options_after_a_session_on_a_model_start_the_toy(capsys):
    """A window started with toy options and no --model (``--heads 8 --mask causal``) after a session on a
    model restored that model from the settings and was refused ("bart model: only the model's own
    masks…", or "--heads does not apply with --model"): the options given say the toy, and it says so."""
    restored = Inputs(model="minilm", layer=3)
    args = build_parser().parse_args(["--heads", "8", "--mask", "causal", "--sentence", "The cat sat."])
    inputs = inputs_from_args(args, restored)
    assert not inputs.uses_model and inputs.heads == 8 and inputs.mask == "causal"
    assert inputs.layer == Inputs().layer
    assert "starting on the toy, not the last session's model minilm" in capsys.readouterr().err
    same = inputs_from_args(build_parser().parse_args(["--sentence", "The cat sat."]), restored)
    assert same.model == "minilm" and same.layer == 3  # no toy option given: the restored model stays
