"""The Generate window's model view, read back from the screen (issue 18): its thumbnails are made at
the device pixels each gets, again after a resize (off the GUI thread), and a one-hot head's peaks
are drawn where they are, at least one device pixel per thumbnail pixel, at two window sizes."""

import threading

import numpy as np
import pytest
from pixels import count_colour, device_rect, grab, mosaic_tiles
from PySide6.QtCore import QRectF

from explorer.engine.generation_view import GenerationView
from explorer.images.thumbnails import EMPTY_INDEX, GAP, thumbnail_shape, tile_side
from explorer.panels.generate_panel import GeneratePanel
from explorer.widgets.colormaps import lookup_table
from explorer.widgets.frames import DELAYS
from models.engine.colour_index import COLOURS
from models.generate import GenerateSettings, generate
from models.pretrained import load_model
from tests.explorer.test_generate_panel import PROMPT, decoder  # noqa: F401 - the shared decoder fixture

TOP = tuple(int(v) for v in lookup_table(True)[COLOURS - 1])  # viridis' yellow
BOTTOM = tuple(int(v) for v in lookup_table(True)[0])  # viridis' dark purple
OFF = 4  # thumbnail pixels from the diagonal: past a reduced peak's 3 × 3 square and a device pixel of rounding
NEW_TOKENS = 50  # about 60 tokens: more than a thumbnail's pixels in the small window, fewer in the large


@pytest.fixture(scope="module")
def one_hot(decoder):  # noqa: F811 - the fixture imported above
    """A real generation whose every head attends to its own token only (a one-hot diagonal)."""
    gen = generate(load_model(decoder, device="cpu"), PROMPT, GenerateSettings(max_new_tokens=NEW_TOKENS))
    L, h, n = gen.num_layers, gen.num_heads, gen.n
    return gen, np.broadcast_to(np.eye(n, dtype=np.float32), (L, h, n, n)).copy()


def settled(qtbot, panel) -> None:
    """The step shown, its thumbnails at the side the view's laid-out pixels ask for (the first
    layout after a new mosaic can change them once: the axes' labels take their room)."""
    assert panel.wait_until_shown()
    qtbot.wait(DELAYS["resize pause"] + 50)  # no other resize pending
    assert panel.wait_until_shown() and panel.model_view.side == panel.model_view.wanted_side()


def diagonal_on_screen(panel) -> tuple[int, float]:
    """Checks every head's thumbnail on screen: each pixel of the diagonal shows the top colour
    within the device pixels the view maps it to (their rectangle: Qt may draw a pixel a device pixel
    off pyqtgraph's mapping), pixels OFF from it the bottom colour and no top colour; returns
    the tile's side and how many device pixels one thumbnail pixel spans (at least 1: never
    reduced a second time by Qt)."""
    view = panel.model_view
    canvas, box = view.canvas, view.mosaic_plot.getViewBox()
    pixels = grab(canvas)
    t_q, t_k = view.tile
    assert t_q == t_k
    x0, _, x1, _ = device_rect(canvas, box, QRectF(0, 0, t_k, 1))
    per_pixel = (x1 - x0) / t_k
    assert per_pixel >= 0.99  # drawn at its own pixels or larger, never reduced a second time by Qt
    for layer in range(view.layers):
        for head in range(view.heads):
            top, left = layer * (t_q + GAP), head * (t_k + GAP)
            for i in range(t_q):
                rect = device_rect(canvas, box, QRectF(left + i, top + i, 1, 1))
                assert count_colour(pixels, TOP, rect) >= 1, (layer, head, i, rect)
                if i >= OFF:  # off the diagonal (and its enlarged peaks): the bottom colour, no top colour
                    rect = device_rect(canvas, box, QRectF(left + i - OFF, top + i, 1, 1))
                    assert count_colour(pixels, TOP, rect) == 0 < count_colour(pixels, BOTTOM, rect), (layer, head, i)
    return t_q, per_pixel


def test_a_one_hot_heads_thumbnail_at_two_window_sizes(qtbot, decoder, one_hot, no_thumbnails_on_gui_thread):  # noqa: F811
    gen, attention = one_hot
    n = gen.n
    panel = GeneratePanel(lambda name: load_model(name, device="cpu"), str(decoder))
    qtbot.addWidget(panel)
    panel.resize(1600, 1000)
    panel.show()
    qtbot.waitExposed(panel)
    view = panel.model_view
    made = []  # the view made on a thread of its own, as the worker makes it (at the default side)
    thread = threading.Thread(target=lambda: made.append(GenerationView(gen, attention=attention)))
    thread.start()
    thread.join()
    panel.worker.finished.emit(panel.worker.request, made[0])
    settled(qtbot, panel)
    assert panel.step == panel.slider.maximum()  # the last step: every row shown
    large = tile_side(view.view_pixels(), gen.num_layers, gen.num_heads)
    assert view.side == large > n  # room for every token: one thumbnail pixel a token
    tile, per_pixel = diagonal_on_screen(panel)
    assert tile == n and per_pixel >= 1
    np.testing.assert_array_equal(mosaic_tiles(view)[:, :, np.arange(n), np.arange(n)], COLOURS - 1)

    with qtbot.waitSignal(view.side_changed, timeout=5000):
        panel.resize(900, 560)
    settled(qtbot, panel)
    small = view.side
    assert view.side == small == tile_side(view.view_pixels(), gen.num_layers, gen.num_heads) < n
    tile, per_pixel = diagonal_on_screen(panel)  # reduced: k tokens a pixel, each peak kept
    assert tile == thumbnail_shape(n, n, small)[0] <= small
    assert 1 <= per_pixel < 2  # whole blocks of tokens a pixel: the tile fills at least half its side
    panel.slider.setValue(0)  # a step back: rows after the prompt's last token are empty, still at this side
    assert panel.wait_until_shown()
    p = gen.prompt_length - 1
    k = -(-n // tile)
    tiles = mosaic_tiles(view)
    assert tiles.shape[-2:] == (tile, tile)
    assert (tiles[:, :, : p // k + 1].max(axis=-1) == COLOURS - 1).all()  # the rows so far: their peaks
    assert (tiles[:, :, p // k + 1 :] == EMPTY_INDEX).all()  # the rows not generated yet: empty
    panel.worker.stop()
    panel.jobs.shutdown()
    assert no_thumbnails_on_gui_thread and not any(no_thumbnails_on_gui_thread)  # made, never on the GUI thread
