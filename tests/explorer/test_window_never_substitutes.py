"""The window never substitutes (issue 19): what ``export`` refuses, the window refuses with the
same line; a bad settings file is reported once and replaced by defaults, and the window starts;
a session's seed of 2**40 works as export takes it; overflowing scores are refused, not painted."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from explorer.files.persistence import INPUTS_KEY, open_settings, read_inputs
from explorer.state import Inputs
from explorer.window import MainWindow
from models.cli.export import export_main
from models.files.session import Session, save_session
from models.runspec import RunSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from test_pretrained_loader import D, gpt2_tensors, write_tiny_gpt2  # noqa: E402

SENTENCE = "the cat sat"


def _export_line(capsys, session: Path, tmp_path: Path) -> str:
    assert export_main(["--session", str(session), "--out", str(tmp_path / "out")]) == 2
    return capsys.readouterr().err.strip().removeprefix("error: ").removeprefix(f"session {session}: ")


def _window_messages(window) -> str:
    return " | ".join([window.status_line.text(), *window.status_line.notices, window.last_error])


@pytest.mark.parametrize(
    "options, words",
    [({"layer": 40}, "layer 40 is out of range: minilm has 6 layers (0..5)"),
     ({"mask": "padding", "pad_positions": (9,)}, "pad position 9 is outside the 5 tokens")],
)  # fmt: skip
def test_a_model_session_the_export_refuses_is_refused_by_the_window_with_its_line(
        qtbot, make_window, settle, tmp_path, capsys, options, words):  # fmt: skip
    path = save_session(tmp_path / "s.zip", Session(RunSpec(model="minilm", sentence=SENTENCE, **options)))
    line = _export_line(capsys, path, tmp_path)
    assert words in line
    window = make_window()
    before = window.state.inputs
    window.sessions.open_session(str(path))
    qtbot.waitUntil(lambda: line in _window_messages(window), timeout=60_000)
    settle(window)
    assert window.state.inputs == before  # the window is as it was: nothing shown instead


def test_a_session_seed_of_2_to_the_40_opens_as_export_takes_it(qtbot, make_window, settle, tmp_path):
    path = save_session(tmp_path / "s.zip", Session(RunSpec(sentence=SENTENCE, seed=2**40)))
    assert export_main(["--session", str(path), "--out", str(tmp_path / "out")]) == 0
    window = make_window()
    window.sessions.open_session(str(path))
    qtbot.waitUntil(lambda: window.state.display.trace.config["seed"] == 2**40, timeout=30_000)
    assert window.settings_panel.seed.value() == 2**40 and not window.status_line.is_error


@pytest.mark.parametrize(
    "stored, bad",
    [('{"heads": 1e999, "sentence": "kept"}', "heads"), ('{"seed": 1e30, "sentence": "kept"}', "seed"),
     ('{"layer": 1e400, "sentence": "kept"}', "layer"), ('{"d_k": 100000000000000000000, "sentence": "kept"}', "d_k"),
     ('{"heads": 100000, "sentence": "kept"}', "heads"), ('{"seed": -5, "sentence": "kept"}', "seed"),
     ('{"temperature": NaN, "sentence": "kept"}', "temperature")],
)  # fmt: skip
def test_a_bad_settings_file_is_reported_and_the_window_starts_with_defaults(qtbot, settle, tmp_path, stored, bad):
    settings = open_settings(tmp_path / "bad.ini")
    settings.setValue(INPUTS_KEY, stored)
    settings.sync()
    inputs, problems = read_inputs(open_settings(tmp_path / "bad.ini"))
    assert inputs == Inputs(sentence="kept") and len(problems) == 1 and problems[0].startswith(bad)
    window = MainWindow(open_settings(tmp_path / "bad.ini"))  # used to raise OverflowError at every launch
    qtbot.addWidget(window)
    window.show()
    settle(window)
    assert window.state.inputs == Inputs(sentence="kept") and not window.status_line.is_error


def test_a_fifo_as_the_settings_file_is_reported_not_waited_on(tmp_path):
    fifo = tmp_path / "settings.ini"
    os.mkfifo(fifo)
    problems: list[str] = []
    done = threading.Event()
    threading.Thread(target=lambda: (open_settings(fifo, problems).value(INPUTS_KEY), done.set()), daemon=True).start()
    assert done.wait(10), "opening a FIFO as the settings file hung"
    assert len(problems) == 1 and "FIFO" in problems[0] and "using the defaults" in problems[0]


def test_the_window_refuses_overflowing_scores_instead_of_painting_nan(qtbot, make_window, settle, tmp_path):
    from safetensors.torch import save_file

    folder = write_tiny_gpt2(tmp_path / "big-qk")
    tensors = gpt2_tensors()
    tensors["h.1.attn.c_attn.weight"][:, : 2 * D] *= 1e20
    save_file(tensors, str(folder / "model.safetensors"))
    window = make_window()
    window.state.update_inputs(model=str(folder), layer=1, sentence=SENTENCE)
    qtbot.waitUntil(lambda: "overflows float32" in window.last_error, timeout=60_000)
    assert "of layer 1" in window.last_error and window.status_line.is_error
