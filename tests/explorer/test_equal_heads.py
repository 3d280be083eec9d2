"""Every head of one matrix is drawn at the same size (issue 44, item 5).

When the grid is short of height only the bottom plot of each column keeps its key labels (matplotlib's
label_outer); those labels must not be taken out of that plot's map: at 16,384 tokens the labelled
plots' maps were 125 px tall beside 220 px for the others, at MiniLM's 512 tokens the third row shorter."""

from explorer.state import Inputs


def map_sizes(window) -> list[tuple[float, float]]:
    """(width, height) in px of each head's map (the plot's ViewBox) as laid out on screen."""
    return [(plot.plot.getViewBox().width(), plot.plot.getViewBox().height()) for plot in window.matrix_view.plots]


def assert_equal_sizes(sizes: list[tuple[float, float]]) -> None:
    widths, heights = [w for w, _ in sizes], [h for _, h in sizes]
    assert max(widths) - min(widths) <= 1 and max(heights) - min(heights) <= 1, sizes
    assert min(heights) >= 40 and min(widths) >= 40, sizes


def open_at(qtbot, settings, inputs: Inputs, size: tuple[int, int]):
    from explorer.window import MainWindow

    window = MainWindow(settings, inputs, stage="weights")
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.matrix_view.state.stepper.stage is not None and window.is_settled(), timeout=180_000)
    window.frames.wait_until_idle()
    return window


def test_eight_heads_of_16384_tokens_have_maps_of_one_size(qtbot, settings):
    sentence = " ".join(f"w{i}" for i in range(16384))
    window = open_at(qtbot, settings, Inputs(sentence=sentence, heads=8, d_model=512, mask="causal"), (1400, 900))
    plots = window.matrix_view.plots
    assert any(not p.bottom.isVisible() for p in plots), "the grid keeps key labels under its bottom plots only"
    assert_equal_sizes(map_sizes(window))


def test_minilm_at_512_tokens_has_twelve_maps_of_one_size(qtbot, settings):
    sentence = " ".join(f"word{i}" for i in range(600))
    for size in ((1400, 900), (960, 700)):
        window = open_at(qtbot, settings, Inputs(sentence=sentence, model="minilm", layer=0), size)
        assert len(window.matrix_view.plots) == 12
        assert_equal_sizes(map_sizes(window))
        window.close()
