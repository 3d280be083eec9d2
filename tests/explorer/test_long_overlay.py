"""A long input's structure drawn over its weights (issue 34): a gpt-oss layer's sliding-window edge and
learned sink on the overview, and beside each head's map the weight each row puts on the first key
(and on the sink), equal to the weights' own column; gone on a stage that has none."""

import numpy as np
import pytest
import torch
from pixels import count_colour, device_rect, grab
from PySide6.QtCore import QPointF, QRectF

from explorer.state import Inputs
from explorer.widgets.long_overlay import EDGE_RGB, KEY0_RGB, LOG_FLOOR
from models.engine import pairs

transformers = pytest.importorskip("transformers")

WINDOW, SINKS = 16, (1.5, -0.5)


def _gpt_oss(folder):
    """A random gpt-oss (layer 0 a sliding window of WINDOW keys, learned sinks SINKS) with a word tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = [f"w{i}" for i in range(50)]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    config = transformers.GptOssConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_local_experts=2,
                                       num_experts_per_tok=1, sliding_window=WINDOW, initializer_range=0.08,
                                       layer_types=["sliding_attention", "full_attention"])  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("sinks"):
                p.copy_(torch.tensor(SINKS))
    model.save_pretrained(folder)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    return " ".join(words[(i * 7) % 50] for i in range(120))


def test_window_edge_sinks_and_sink_share_drawn_over_a_long_inputs_weights(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setattr(pairs, "LONG_CELLS", 0)  # the long path (rows' statistics, streamed overview) at 120 tokens
    sentence = _gpt_oss(tmp_path)
    window = make_window(Inputs(model=str(tmp_path), layer=0, sentence=sentence), stage="weights")
    def drawn() -> bool:
        image = window.state.display.images.get("weights")
        return image is not None and image.progress == 1.0 and image.structure is not None and window.is_settled()

    qtbot.waitUntil(drawn, timeout=60_000)
    stage = window.state.display.trace["weights"]
    assert stage.store.long is not None
    n = stage.shape[1]
    for plot in window.matrix_view.plots:
        overlay = plot.long_overlay
        assert overlay is not None and overlay.view.isVisible() and overlay.edges.isVisible()
        assert overlay.edge_label.textItem.toPlainText() == f"window {WINDOW}"
        assert overlay.sink.isVisible() and overlay.sink.value() == n
        assert overlay.sink.label.format == f"learned sink s = {SINKS[plot.head]:.2f}"
        weights = stage.head(plot.head)  # (n, n + 1): the keys, then the sink
        x, y = overlay.key0.getData()
        seen = weights[:WINDOW, 0]  # key 0 leaves the window after row WINDOW − 1: no line there
        np.testing.assert_allclose(x[:WINDOW], np.log10(np.maximum(seen, 10.0**LOG_FLOOR)), rtol=1e-5)
        np.testing.assert_array_equal(y[:WINDOW], np.arange(WINDOW) + 0.5)
        assert np.isnan(x[WINDOW:]).all()
        x, _ = overlay.sink_share.getData()
        np.testing.assert_allclose(x, np.log10(weights[:, n]), rtol=1e-5)
    # what is painted: the dashed edge on the mask's boundary (x = i − WINDOW + 1 at row i), the line beside
    view = window.matrix_view
    pixels, ratio = grab(view.canvas), view.canvas.devicePixelRatioF()
    plot = view.plots[0]
    box = plot.plot.getViewBox()
    x0, y0, x1, y1 = device_rect(view.canvas, box, QRectF(0, 12, n - 6, n - 12 - 12))  # clear of the labels
    ys, xs = np.nonzero(np.all(np.abs(pixels[y0:y1, x0:x1].astype(int) - EDGE_RGB) <= 12, axis=2))
    labels = [item.sceneBoundingRect() for item in (plot.long_overlay.sink.label, plot.long_overlay.edge_label)]
    on_edge = 0
    for x, y in zip(xs, ys, strict=True):
        scene = view.canvas.mapToScene(int((x + x0) / ratio), int((y + y0) / ratio))
        if any(label.contains(scene) for label in labels):  # their text is the edge's colour
            continue
        at = box.mapSceneToView(scene)
        assert abs(at.x() - (at.y() - WINDOW + 1)) < 2.5, (at.x(), at.y())  # within 2 cells of the edge
        on_edge += 1
    assert on_edge > 40
    side = plot.long_overlay.view
    top_left = view.canvas.mapFromScene(side.mapViewToScene(QPointF(LOG_FLOOR, 0)))
    bottom_right = view.canvas.mapFromScene(side.mapViewToScene(QPointF(0, WINDOW)))
    line = (int(top_left.x() * ratio), int(top_left.y() * ratio), int(bottom_right.x() * ratio) + 1,
            int(bottom_right.y() * ratio) + 1)  # fmt: skip
    assert count_colour(pixels, KEY0_RGB, line, tolerance=40) > 10  # key 0's share over the rows that see it
    window.state.stage_name = "scores"  # a stage without the structure: none of it shown
    window.matrix_view.refresh()  # (laid out anew without the side plots, then filled in a later turn)
    qtbot.waitUntil(lambda: all(not p.long_overlay.view.isVisible() and not p.long_overlay.edges.isVisible()
                                for p in window.matrix_view.plots))  # fmt: skip
