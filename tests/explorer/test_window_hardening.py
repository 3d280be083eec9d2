"""The window recovers from anything (issue 12): out-of-memory as one line, long pasted text kept."""


import pytest

from explorer.app import run_app
from explorer.engine.worker import ComputeWorker
from explorer.state import Inputs
from models.config import AttentionRequest
from models.memory import OUT_OF_MEMORY


def test_an_out_of_memory_runtime_error_is_the_same_one_line_and_the_window_keeps_working(qtbot, make_window):
    # Regression: torch raises RuntimeError (not MemoryError) when the allocator fails: it showed
    # as an "engine error" with a traceback.
    from models.engine import pipeline

    calls = []

    def run(request, should_stop):
        calls.append(request)
        if len(calls) == 2:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")
        return pipeline.run(request, should_stop)

    window = make_window(Inputs(sentence="one two three", heads=2, d_model=8),
                         worker=ComputeWorker({AttentionRequest: run}))  # fmt: skip
    window.state.update_inputs(seed=4)
    qtbot.waitUntil(window.is_settled, timeout=10_000)
    assert window.status_line.is_error and window.status_line.plain_text().endswith(OUT_OF_MEMORY)
    assert "engine error" not in window.status_line.plain_text()
    window.state.update_inputs(seed=5)  # the next edit works
    qtbot.waitUntil(window.is_settled, timeout=10_000)
    assert not window.status_line.is_error and window.state.display.trace.config["seed"] == 5


def test_text_longer_than_qts_default_limit_is_not_cut(qtbot, make_window):
    # Regression: QLineEdit silently cut pasted text at 32,767 characters.
    window = make_window(Inputs(sentence="one two", heads=2, d_model=8))
    text = " ".join(f"word{i}" for i in range(6000))  # ~52,000 characters, 6,000 tokens
    edit = window.sentence_panel.sentence_edit
    edit.setText(text)
    assert edit.text() == text
    window.sentence_panel.flush()
    qtbot.waitUntil(window.is_settled, timeout=60_000)
    assert len(window.state.display.trace.key_tokens) == 6000


def _big_qk(folder):
    """A tiny GPT-2 whose layer 1 scores overflow float32 (its q and k projections × 1e20)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from safetensors.torch import save_file
    from test_pretrained_loader import D, gpt2_tensors, write_tiny_gpt2

    write_tiny_gpt2(folder)
    tensors = gpt2_tensors()
    tensors["h.1.attn.c_attn.weight"][:, : 2 * D] *= 1e20
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("view", ["model", "metrics", "rollout"])
def test_a_whole_model_view_of_a_model_whose_scores_overflow_is_refused_at_once(tmp_path, capsys, monkeypatch, view):
    """Issue 36, item 4: the survey failed (layer 1's scores overflow float32) but the screenshot
    waited for it 120 s, then said "timed out". Now its one line, as soon as the survey fails."""
    import explorer.app

    folder = _big_qk(tmp_path / "big-qk")
    monkeypatch.setattr(explorer.app, "SCREENSHOT_TIMEOUT_MS", 30_000)  # a hang fails in 30 s, not 120
    out = tmp_path / "shot.png"
    argv = ["--model", str(folder), "--layer", "0", "--sentence", "the cat sat", "--view", view,
            "--screenshot", str(out)]  # fmt: skip
    assert run_app(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: ") and "overflows float32" in err[0], err
    assert "layer 1" in err[0] and not out.exists()


def test_the_generate_window_shows_no_nan_but_one_line(qtbot, tmp_path):
    """Issue 36, item 5: on a model whose scores overflow, the Generate window showed ``nan``
    probabilities and NaN rows. Now the status line says why, and nothing is shown."""
    from PySide6.QtWidgets import QLabel

    from explorer.panels.generate_panel import GeneratePanel
    from models.pretrained import load_model

    panel = GeneratePanel(lambda name: load_model(name, device="cpu"), str(_big_qk(tmp_path / "big-qk")))
    qtbot.addWidget(panel)
    panel.prompt_edit.setText("the cat sat")
    panel.new_tokens.setValue(3)
    panel.show()
    panel.generate(now=True)
    qtbot.waitUntil(lambda: panel.status.text().startswith("error: "), timeout=30_000)
    assert "overflows float32" in panel.status.text() and "layer 1" in panel.status.text()
    assert panel.view is None
    shown = [label.text() for label in panel.findChildren(QLabel)]
    assert not any("nan" in text.lower().split() or "nan%" in text.lower() for text in shown), shown
    panel.worker.stop()


@pytest.mark.parametrize("model", [["--model", "minilm"], []])
def test_a_sentence_that_is_not_utf8_is_refused_as_export_refuses_it(tmp_path, capsys, model):
    """Issue 36, item 6: with --model it was a TypeError traceback (the tokenizer takes only
    text); without, the window took it and saved a session no one could read."""
    out = tmp_path / "shot.png"
    assert run_app([*model, "--sentence", "the \udcff cat", "--screenshot", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == ["error: --sentence is not valid UTF-8 text: 'the \\udcff cat'"] and not out.exists()


def test_a_corrupt_checkpoint_is_named_by_its_step(tmp_path):
    """Issue 36, item 8: the timeline refused the whole history with a line that did not say
    which checkpoint was at fault."""
    from explorer.engine.timeline_data import build_timeline
    from models.config import InputError
    from models.training.data import DataConfig
    from models.training.train import TrainConfig, train

    train(tmp_path / "run", TrainConfig(steps=3, checkpoints=3, batch_size=4, lr=2e-2,
                                        data=DataConfig(seq_len=16, max_block=6)))  # fmt: skip
    steps = sorted((tmp_path / "run" / "checkpoints").iterdir())
    bad = steps[1]
    (bad / "model.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(InputError) as refused:
        build_timeline(str(tmp_path / "run"), "abcabc")
    step = int(bad.name.removeprefix("step-"))
    assert f"the checkpoint of step {step} ({bad})" in str(refused.value) and "\n" not in str(refused.value)


def test_running_out_of_memory_while_a_session_is_read_is_one_line(make_window, settle, tmp_path, monkeypatch):
    """Issue 36, item 3: a session with big arrays ended the window on a MemoryError traceback.
    (What is read is now held without copies: tests/models/test_hardening_memory.py.)"""
    import explorer.files.session_io as session_io
    from models.files.session import Session, save_session

    window = make_window()
    settle(window)
    before = window.state.inputs
    path = save_session(tmp_path / "s.zip", Session(window.state.display.request))

    def out_of_memory(_path):
        raise MemoryError

    monkeypatch.setattr(session_io, "load_session", out_of_memory)
    assert not window.sessions.open_session(str(path))
    assert window.status_line.is_error and window.status_line.plain_text().endswith(OUT_OF_MEMORY)
    assert window.state.inputs == before
