"""Numbers in cells only when they fit at the current zoom, never overlapping; 3 significant digits or
none; when hidden, the Numbers box says why."""

from pixels import overlapping
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFontMetricsF

from explorer.state import Inputs
from explorer.widgets.cell_numbers import cell_text, parse_cell_text

# Sharp weights (temperature 0.05): most are tiny, "0.000304" and "9.82e−05" beside each other.
SHARP = Inputs(sentence="the cat sat on a mat while dogs ran far away now", heads=2, d_model=8, temperature=0.05)


def _number_rects(view):
    """Each written number's rectangle on screen (device pixels) and its text."""
    out = []
    for plot in view.plots:
        item = view.numbers.item_for(plot)
        box = plot.plot.getViewBox()
        metrics = QFontMetricsF(item.font)
        for row, col, text, _ in item.cells:
            cell = box.mapViewToScene(QRectF(col, row, 1, 1)).boundingRect()
            width = metrics.horizontalAdvance(text)
            rect = QRectF(cell.center().x() - width / 2, cell.center().y() - metrics.height() / 2, width,
                          metrics.height())  # fmt: skip
            out.append((rect, cell, text))
    return out


def _check(view):
    rects = _number_rects(view)
    for rect, cell, text in rects:
        assert rect.left() >= cell.left() and rect.right() <= cell.right(), (text, rect, cell)
    assert not overlapping([r for r, _, _ in rects])
    return rects


def test_numbers_never_overlap_at_any_width(qtbot, make_window, settle):
    window = make_window(SHARP, stage="weights")
    view = window.matrix_view
    seen_hidden = seen_shown = False
    for width in range(900, 1700, 100):
        window.resize(width, 1000)
        settle(window)
        view.flush()
        view.numbers.update()
        rects = _check(view)
        if rects:
            seen_shown = True
            assert view.numbers.checkbox.text() == "Numbers"
        else:
            seen_hidden = True
            assert "zoom in" in view.numbers.checkbox.text()
    assert seen_shown or seen_hidden


def test_zoomed_in_the_numbers_come_back(qtbot, make_window, settle):
    window = make_window(SHARP, stage="weights")
    view = window.matrix_view
    window.resize(900, 900)
    settle(window)
    box = view.plots[0].plot.getViewBox()
    box.setRange(xRange=(0, 3), yRange=(0, 3), padding=0)
    view.numbers.update()  # the zoomed rows may still be on their way from the read thread: wait for them
    qtbot.waitUntil(lambda: len(view.numbers.item_for(view.plots[0]).cells) == 9, timeout=10_000)  # 3 × 3 cells
    _check(view)


def test_short_forms_still_read_back():
    assert cell_text(9.82e-05) == "9.82e−5"
    assert cell_text(9.82e-05, 2) == "9.8e−5" and cell_text(0.000304, 1) == "0.0003"
    assert parse_cell_text("9.82e−5") == 9.82e-05


def test_minilm_layer_2_head_9_numbers_fit_their_cells(make_window):
    # The case: "0.0003049.82e−050.000358" written across three cells.
    inputs = Inputs(model="minilm", layer=2, sentence="The animal didn't cross the street because it was too tired.")
    window = make_window(inputs, stage="weights", head=9)
    view = window.matrix_view
    view.flush()
    view.numbers.update()
    rects = _check(view)
    assert rects or "zoom in" in view.numbers.checkbox.text()


def _significant(text: str) -> int:
    mantissa = text.replace("−", "").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa)


def test_every_head_writes_its_numbers_alike(qtbot, make_window, settle):
    """One choice of digits and font for every plot: on Q of the README sentence head 0 read
    "−0.088" in a 7 px font beside head 1's "−0.09" in 12 px."""
    window = make_window(Inputs(sentence="The animal didn't cross the street because it was too tired.", heads=2,
                                d_model=16), stage="q")  # fmt: skip
    window.resize(1800, 1100)  # room for 3 digits in a readable font (fewer are never written)
    settle(window)
    view = window.matrix_view
    view.flush()
    view.numbers.update()
    items = [view.numbers.item_for(plot) for plot in view.plots]
    assert len(items) == 2
    qtbot.waitUntil(lambda: all(item.cells for item in items), timeout=10_000)  # rows read off the GUI thread
    assert len({item.font.pixelSize() for item in items}) == 1
    digits = [max(_significant(text) for _, _, text, _ in item.cells) for item in items]
    assert digits[0] == digits[1]
    _check(view)


def test_a_head_too_narrow_for_numbers_does_not_hide_the_zoomed_heads_numbers(qtbot, make_window, settle):
    """Zoomed into head 0 while head 1's cells are 18 px square (big enough to try, too narrow for
    any number): head 0 lost its numbers too (a full run caught it, at a 1352 px window)."""
    window = make_window(SHARP, stage="weights")
    view = window.matrix_view
    window.resize(1300, 900)
    settle(window)
    zoomed, other = (plot.plot.getViewBox() for plot in view.plots)
    zoomed.setRange(xRange=(0, 3), yRange=(0, 3), padding=0)
    other.setRange(xRange=(0, other.width() / 18), yRange=(0, other.height() / 24), padding=0)
    view.numbers.update()
    qtbot.waitUntil(lambda: len(view.numbers.item_for(view.plots[0]).cells) == 9, timeout=10_000)
    assert view.numbers.item_for(view.plots[1]).cells == []
    assert "zoom in" in view.numbers.checkbox.text()
    _check(view)
