"""How much work the numbers in cells take per update: each value is written (formatted) at most once
per update, and not at all where no number can fit (a MiniLM sentence's heatmaps: 12 heads of cells
just wide enough to try, formatting every value three times for nothing was the longest turn)."""

from explorer.state import Inputs
from explorer.widgets import cell_numbers

# Sharp weights (temperature 0.05): most are tiny, "0.000304" and "9.82e−05" beside each other.
SHARP = Inputs(sentence="the cat sat on a mat while dogs ran far away now", heads=2, d_model=8, temperature=0.05)
FOUR = Inputs(sentence="one two three four", heads=2, d_model=8, mask="causal")
TRIED = 3  # values a plot's texts are tried on before all are written, per choice of digits (at most)


def _count_texts(monkeypatch) -> list[int]:
    calls = [0]
    real = cell_numbers.cell_text

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(cell_numbers, "cell_text", counted)
    return calls


def test_numbers_too_wide_for_the_cells_are_not_all_written(qtbot, make_window, settle, monkeypatch):
    window = make_window(SHARP, stage="weights")
    view = window.matrix_view
    window.resize(1300, 900)
    settle(window)
    for plot in view.plots:  # cells 18 px wide: big enough to try, too narrow for any of these numbers
        box = plot.plot.getViewBox()
        box.setRange(xRange=(0, box.width() / 18), yRange=(0, box.height() / 24), padding=0)
    view.numbers.update()
    qtbot.waitUntil(lambda: view.numbers.hidden_because == "the numbers are wider than the cells", timeout=10_000)
    calls = _count_texts(monkeypatch)
    view.numbers.update()
    assert view.numbers.hidden_because == "the numbers are wider than the cells"
    assert all(view.numbers.item_for(plot).cells == [] for plot in view.plots)
    choices = len(cell_numbers.CHOICES)
    assert calls[0] <= TRIED * choices * len(view.plots)  # was 3 digits × every visible cell (144) × 2 plots


def test_each_shown_number_is_written_once_per_update(qtbot, make_window, monkeypatch):
    window = make_window(FOUR)
    window.resize(1300, 850)
    view = window.matrix_view
    view.flush()
    qtbot.waitUntil(lambda: all(len(view.numbers.item_for(p).cells) == 16 for p in view.plots), timeout=3000)
    calls = _count_texts(monkeypatch)
    view.numbers.update()
    shown = sum(len(view.numbers.item_for(p).cells) for p in view.plots)
    assert shown == 32
    assert calls[0] <= shown + TRIED * len(view.plots)  # was twice: measured, then written again
