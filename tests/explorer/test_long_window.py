"""The window at long inputs (issue 34): a long text opened from a file (the sentence box shows its
start without laying out all of it), the weights' overview streamed in with its progress, and two
isolated strong weights among 65,536 tokens seen where they are (the pixel harness)."""

import numpy as np
import pytest
from pixels import cell_centre, grab, square_of

from explorer.state import Inputs
from explorer.widgets.colormaps import lookup_table
from explorer.widgets.sentence_panel import LONG_TEXT
from models.engine.colour_index import COLOURS
from models.run_engine import toy_request

TOP = tuple(int(v) for v in lookup_table(True)[COLOURS - 1])


def test_open_text_puts_a_long_text_in_the_sentence_and_shows_its_start(make_window, tmp_path):
    window = make_window()
    words = [f"w{i % 900}" for i in range(5000)]
    path = tmp_path / "long.txt"
    path.write_text("\n".join(" ".join(words[i : i + 10]) for i in range(0, 5000, 10)))  # lines: one sentence
    assert window.registry["file.open_text"].title == "Open text…"
    assert window.files.open_text(str(path))
    assert window.state.inputs.sentence == " ".join(words)
    edit = window.sentence_panel.sentence_edit
    assert len(" ".join(words)) > LONG_TEXT and edit.isReadOnly()
    assert edit.text().startswith("w0 w1 w2") and edit.text().endswith("(5,000 words, from a file)")
    assert len(edit.text()) < 3000  # never the whole text in the box
    window.sentence_panel.flush()
    assert window.state.inputs.sentence == " ".join(words)  # the preview is never pushed back
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe")
    assert not window.files.open_text(str(tmp_path / "bad.txt"))
    assert "is not UTF-8" in window.status_line.text() and window.state.inputs.sentence == " ".join(words)
    window.sentence_panel.examples.activated.emit(1)  # an example replaces it, and the box is editable again
    assert not edit.isReadOnly() and window.state.inputs.sentence == edit.text() != " ".join(words)


def test_two_strong_weights_among_65536_tokens_are_seen_where_they_are(qtbot, settings, tmp_path):
    from explorer.window import MainWindow

    n, peaks = 65536, [(60000, 1234), (30000, 29000)]
    x = np.zeros((n, 4), np.float32)  # token r looks for token c alone: q_r · k_c = 40², every other 0
    for axis, (r, c) in enumerate(peaks):
        x[r, axis], x[c, axis + 2] = 40.0, 40.0
    w_q = np.zeros((1, 4, 4), np.float32)  # h × d_model × d_k
    w_k = np.zeros((1, 4, 4), np.float32)
    w_q[0, 0, 0] = w_q[0, 1, 1] = 1.0  # the queries' axes 0, 1 ...
    w_k[0, 2, 0] = w_k[0, 3, 1] = 1.0  # ... meet the keys' axes 2, 3
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "w.npz", W_q=w_q, W_k=w_k, W_v=np.ones((1, 4, 4), np.float32))
    inputs = Inputs(heads=1, d_model=4, mask="causal", embeddings_file=str(tmp_path / "x.npy"),
                    weights_file=str(tmp_path / "w.npz"))  # fmt: skip
    window = MainWindow(settings, inputs, stage="weights")  # not make_window: it waits 15 s at most
    qtbot.addWidget(window)
    seen = []
    window.state.stage_image_added.connect(lambda name: seen.append(window.state.display.images[name].progress))
    window.show()
    view = window.matrix_view
    qtbot.waitUntil(lambda: view.state.stepper.stage is not None and window.is_settled(), timeout=900_000)
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)  # streamed in, top to bottom, to the end
    assert window.state.display.trace["weights"].store.long is not None
    pixels = grab(view.canvas)
    box = view.plots[0].plot.getViewBox()
    for r, c in peaks:
        x_px, y_px = cell_centre(view.canvas, box, r, c)
        assert square_of(pixels, x_px, y_px, TOP, size=3), (r, c)
    assert view.state.display.trace["weights"].cell(0, 60000, 1234) > 0.999


def test_a_long_overview_sends_a_picture_only_when_the_gui_asks(monkeypatch):
    """Issue 32: the stream keeps no clock. The first block's picture goes at once; the next only
    once the GUI asked (``want``: a frames.later after the last came), after the block then done."""
    from explorer.engine.long_render import Overviews
    from explorer.widgets.frames import DELAYS
    from models.engine import pairs, pipeline
    from models.engine.colour_index import MAX_DISPLAY_SIDE
    from models.runspec import RunSpec

    monkeypatch.setattr(pairs, "LONG_CELLS", 0)  # the long path: an overview streamed, 2 × 2 cells a pixel
    sentence = " ".join(f"w{i % 50}" for i in range(2 * MAX_DISPLAY_SIDE))
    trace = pipeline.run(toy_request(RunSpec(sentence=sentence, heads=3, d_model=12, mask="causal")))
    stage, overviews = trace["weights"], Overviews()
    blocks, sent = [0], []

    def serve() -> None:  # between two blocks of rows: the GUI asks once, before the third block's picture
        blocks[0] += 1
        if blocks[0] == 3:
            overviews.want()

    final = overviews.stream(trace, stage, False, lambda: False, lambda image: sent.append(blocks[0]), serve)
    assert sent == [1, 3] and blocks[0] > 3 and final.progress == 1.0
    assert overviews.next_ask_ms() >= DELAYS["stream every"]


def test_eight_heads_of_16384_tokens_fill_the_window_with_their_sink_share_plots(qtbot, settings):
    """At 16,384 tokens each map has its sink-share plot beside it (92 px) and upright key labels
    137 px tall under it. The grid's plan counted neither: three columns of 60 × 40 px maps in a
    1400 × 900 window, most of it empty. Counted, and the labels kept under the bottom plots only,
    the maps are several times larger, and every side plot is inside the canvas."""
    from explorer.widgets.long_overlay import SIDE_PX
    from explorer.window import MainWindow

    sentence = " ".join(f"w{i}" for i in range(16384))
    window = MainWindow(settings, Inputs(sentence=sentence, heads=8, d_model=512, mask="causal"), stage="weights")
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    view = window.matrix_view
    qtbot.waitUntil(lambda: view.state.stepper.stage is not None and window.is_settled(), timeout=120_000)
    canvas = view.canvas.viewport().width()
    for plot in view.plots:
        overlay = plot.long_overlay
        assert overlay is not None and overlay.shown
        assert plot.plot.vb.width() >= 120 and plot.plot.vb.height() >= 60, (plot.head, plot.plot.vb.size())
        right = overlay.view.mapRectToScene(overlay.view.boundingRect()).right()
        assert right <= canvas and overlay.view.width() >= SIDE_PX - 2


def test_an_interrupted_overview_goes_on_from_the_rows_it_had_done(monkeypatch):
    """Issue 50, point 1: at 65,536 tokens the neighbours' strips, asked near the overview's end,
    interrupted it and it began again from the top (the screenshot's deadline then saw no progress:
    "timed out"). Asked again, it computes the rows it had not done, and its pixels are those of an
    overview never interrupted."""
    from explorer.engine.long_render import Overviews
    from models.config import Cancelled
    from models.engine import pairs, pipeline
    from models.engine.colour_index import MAX_DISPLAY_SIDE
    from models.runspec import RunSpec

    monkeypatch.setattr(pairs, "LONG_CELLS", 0)  # the long path: an overview streamed, 2 × 2 cells a pixel
    sentence = " ".join(f"w{i % 50}" for i in range(2 * MAX_DISPLAY_SIDE))
    trace = pipeline.run(toy_request(RunSpec(sentence=sentence, heads=2, d_model=12, mask="causal")))
    stage, overviews = trace["weights"], Overviews()
    long = stage.store.long
    starts = []
    overview = long.overview
    monkeypatch.setattr(long, "overview", lambda head, region, *a: starts.append((head, region[0])) or
                        overview(head, region, *a))  # fmt: skip
    bands = [0]

    def stop() -> bool:  # another stage asked for in the second head's overview
        bands[0] += 1
        return bands[0] == 8 + 3  # 2,048 rows: 8 bands of 256 a head

    with pytest.raises(Cancelled):
        overviews.stream(trace, stage, False, stop, lambda image: None, lambda: None)
    done = list(overviews.rows_done)
    assert done[0] == overviews.peaks[0].shape[0] and 0 < done[1] < overviews.peaks[1].shape[0]
    starts.clear()
    final = overviews.stream(trace, stage, False, lambda: False, lambda image: None, lambda: None)
    assert starts == [(1, done[1] * overviews.step[0])]  # head 0 not again, head 1 from where it was
    again = Overviews().stream(trace, stage, False, lambda: False, lambda image: None, lambda: None)
    np.testing.assert_array_equal(final.indices, again.indices)
    assert final.progress == 1.0
