"""SmolLM2-135M-Instruct's GGUF file in the window: File's model list opens it ("Open GGUF file…"), layer
16 shows the previous-token head (head 0) as the engine traces it, and --screenshot renders the main view."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PySide6.QtGui import QImage

from explorer.app import run_app
from explorer.state import ALL_HEADS, Inputs
from explorer.widgets.model_chooser import OPEN_FILE
from models.api import load

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from real_models import smollm2  # noqa: E402

SENTENCE = "The cat sat on the mat because it was tired."


def test_open_gguf_file_shows_the_previous_token_head(make_window, settle, monkeypatch):
    path = smollm2()
    window = make_window(Inputs(sentence=SENTENCE))
    monkeypatch.setattr(window, "ask_model_folder", lambda start, gguf=False: str(path) if gguf else None)
    combo = window.model_chooser.combo
    index = combo.findData(OPEN_FILE)
    combo.setCurrentIndex(index)
    combo.activated.emit(index)
    settle(window, timeout=600_000)
    window.state.update_inputs(layer=16)
    settle(window, timeout=600_000)
    assert not window.status_line.is_error
    assert combo.currentText() == f"{path.name}  (file)"
    assert window.state.display.trace.meta["layer"] == 16
    window.state.set_head(ALL_HEADS)
    window.state.set_stage("weights")
    window.matrix_view.flush()
    want = load(path, device="cpu").trace(SENTENCE, layer=16).stage("weights")
    np.testing.assert_allclose(window.matrix_view.shown_values(), want, atol=1e-6)
    n = want.shape[-1]
    assert np.diagonal(want[0], offset=-1).mean() > 0.5  # head 0: the previous token, row by row
    assert want[1:, 1:, 0].mean() > 0.3 and n == 11  # the others: the first token's sink column


def test_screenshot_of_the_main_view(tmp_path):
    out = tmp_path / "smol.png"
    argv = ["--model", str(smollm2()), "--layer", "16", "--sentence", SENTENCE, "--screenshot", str(out)]
    assert run_app(argv) == 0
    image = QImage(str(out))
    assert image.width() >= 1000 and image.height() >= 600
