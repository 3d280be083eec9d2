"""The cell inspector in the window: clicking a cell derives it from its real inputs."""

import numpy as np
from mouse import cell_point
from PySide6.QtCore import Qt

from explorer.state import Inputs


def _click(qtbot, view, plot, row, col):
    qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(view, plot, row, col))


def test_clicking_a_weight_shows_its_softmax_derivation(qtbot, make_window):
    window = make_window(Inputs(sentence="one two three four five", heads=2, d_model=8, mask="causal"))
    window.state.set_stage("weights")
    view, trace = window.matrix_view, window.state.display.trace
    _click(qtbot, view, 1, 3, 2)
    assert window.jobs.wait_until_idle()
    d = window.inspector.inspector.derivation
    assert d is not None and d.stage == "weights" and tuple(d.cell) == (1, 3, 2)
    assert d.value == float(trace["weights"].head(1)[3, 2])
    assert window.inspector.inspector.isVisible()


def test_clicking_a_score_lists_its_products_adding_up_to_it(qtbot, make_window):
    window = make_window(Inputs(sentence="one two three four", heads=2, d_model=8))
    window.state.set_stage("scores")
    view, trace = window.matrix_view, window.state.display.trace
    _click(qtbot, view, 0, 2, 1)
    assert window.jobs.wait_until_idle()
    d = window.inspector.inspector.derivation
    assert d.value == float(trace["scores"].head(0)[2, 1])
    terms = [t.value for t in d.sum_of]
    assert len(terms) == trace["q"].shape[-1]  # one product per feature of q and k
    np.testing.assert_allclose(sum(terms), d.value, rtol=1e-5, atol=1e-6)
    window.state.update_inputs(seed=3)  # a new trace: the old derivation's numbers are gone
    qtbot.waitUntil(lambda: window.inspector.inspector.derivation is None or not window.inspector.inspector.isVisible())


def test_the_positional_encoding_lens_opens_for_the_sentence(qtbot, make_window):
    window = make_window(Inputs(sentence="one two three four five six", heads=2, d_model=8, pe=True))
    lens = window.windows.open_pe_lens()
    qtbot.addWidget(lens)
    assert (lens.n, lens.d) == (6, 8)
    for delta in (1, 2, 4):
        lens.set_delta(delta)
        assert lens.largest_error() < 1e-5


def test_the_derivation_is_read_off_the_gui_thread(qtbot, make_window, no_stage_reads_on_gui_thread):
    window = make_window(Inputs(sentence="one two three four", heads=2, d_model=8))
    display = window.state.display
    reads = no_stage_reads_on_gui_thread()
    window.inspector.explain_cell(display, display.trace["scores"], 1, 2, 1)
    assert window.jobs.wait_until_idle()
    d = window.inspector.inspector.derivation
    assert d is not None and tuple(d.cell) == (1, 2, 1)
    no_stage_reads_on_gui_thread.disarm()  # the window's own turns after the test may read again
    assert reads and not any(on_gui for _what, on_gui in reads)


def test_a_long_derivation_scrolls_and_never_makes_the_window_taller(qtbot, make_window, settle):
    """A score's derivation (bars, products, sums) asked for ~600 px: clicking a cell made a 900 px
    window 1,106 px tall, past the bottom of a laptop's screen."""
    sentence = "The animal didn't cross the street because it was too tired."
    window = make_window(Inputs(sentence=sentence, heads=2, d_model=16, mask="causal"), stage="scores")
    window.resize(1400, 900)
    window.show()
    settle(window)
    window.select_cell(0, 6, 1)
    assert window.jobs.wait_until_idle()
    qtbot.wait(50)  # the layout requests the derivation posted
    assert window.inspector.inspector.derivation is not None
    assert window.height() == 900 and window.minimumSizeHint().height() <= 900
    assert window.inspector_scroll.verticalScrollBar().maximum() > 0  # the rest is a scroll away
