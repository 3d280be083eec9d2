"""The window recovers from anything (issue 12): out-of-memory as one line, long pasted text kept."""


from explorer.engine.worker import ComputeWorker
from explorer.state import Inputs
from models.config import AttentionRequest
from models.memory import OUT_OF_MEMORY


def test_an_out_of_memory_runtime_error_is_the_same_one_line_and_the_window_keeps_working(qtbot, make_window):
    # Regression: torch raises RuntimeError (not MemoryError) when the allocator fails: it showed
    # as an "engine error" with a traceback.
    from models import pipeline

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
