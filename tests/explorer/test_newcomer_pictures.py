"""Issue 35, "what a newcomer trips over": the pictures (each test failed before its fix)."""

from __future__ import annotations

import explorer.widgets.labels as labels
from explorer.widgets.labels import display_text

MIXED = "Café naïve 東京は美しい مرحبا بالعالم 🎉👍🏽 São Paulo"


def test_running_text_keeps_its_spaces_and_lines_when_a_character_has_no_font(qapp, monkeypatch):
    """Item 1: with one undrawable character every space and newline of the inspector's text read
    ``U+0020`` / ``U+000A``; only the undrawable characters are code points."""
    monkeypatch.setattr(labels, "installed_font_covers", lambda cp: cp < 0x2E80)  # no CJK, no emoji
    shown = display_text("key 東京 (3)\nq · k = 1.5")
    assert shown == "key U+6771 U+4EAC (3)\nq · k = 1.5"
    assert "U+0020" not in display_text(MIXED) and "U+000A" not in display_text(MIXED + "\nnext")
    assert display_text("a東b") == "a U+6771 b"
    assert display_text("👍🏽 ok") == "U+1F44D U+1F3FD ok"


def test_tokens_that_look_like_html_are_shown_as_themselves(qtbot):
    """Item 2: the rollout's titles for ``<s>`` read ``'' by layer``, struck through; every title that
    pyqtgraph lays out as HTML shows such a token as its text."""
    import numpy as np

    from explorer.widgets.heatmap_plot import HeatmapPlot
    from explorer.widgets.rollout_view import RolloutView
    from explorer.widgets.topk_bars import TopKBars

    view = RolloutView()
    qtbot.addWidget(view)
    rollout = np.tile(np.eye(3, dtype=np.float32), (2, 1, 1))
    view.set_rollout(rollout, ("<s>", "a&b", "</w>"))
    view.choose(1, 0)
    assert view.rows_plot.titleLabel.item.toPlainText() == "'<s>' by layer"
    assert view.bars_plot.titleLabel.item.toPlainText() == "'<s>' after layer 1"
    view.choose(1, 1)
    assert view.rows_plot.titleLabel.item.toPlainText() == "'a&b' by layer"
    plot = HeatmapPlot(0)
    plot.set_title("Query <s> · head 0")
    assert plot.plot.titleLabel.item.toPlainText() == "Query <s> · head 0"
    bars = TopKBars()
    qtbot.addWidget(bars)
    bars.set_bars(["<s>", "a"], [0.6, 0.3], chosen=None, title="after <b>")
    assert bars.plot.getPlotItem().titleLabel.item.toPlainText() == "after <b>"
